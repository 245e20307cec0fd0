import time
while True:
    t = time.monotonic() + 0.010
    while time.monotonic() < t:
        pass
    time.sleep(0.030)
