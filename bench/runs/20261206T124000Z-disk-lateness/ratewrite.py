import os, sys, time
# ratewrite.py PATH MODE: 4 GiB at 240 MB/s in 8 MiB writes; MODE plain | behind (sync_file_range write-behind + drop)
path, mode = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
buf = os.urandom(8 << 20)
t0 = time.monotonic()
n = 512
for i in range(n):
    os.pwrite(fd, buf, i << 23)
    if mode == "behind":
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sync_file_range(fd, ctypes.c_int64(i << 23), ctypes.c_int64(8 << 20), 2)  # WRITE
        if i >= 2:
            libc.sync_file_range(fd, ctypes.c_int64((i - 2) << 23), ctypes.c_int64(8 << 20), 7)  # WAIT_BEFORE|WRITE|WAIT_AFTER
            os.posix_fadvise(fd, (i - 2) << 23, 8 << 20, os.POSIX_FADV_DONTNEED)
    if mode == "fadv":
        os.posix_fadvise(fd, i << 23, 8 << 20, os.POSIX_FADV_DONTNEED)
        if i >= 2:
            os.posix_fadvise(fd, (i - 2) << 23, 8 << 20, os.POSIX_FADV_DONTNEED)
    d = t0 + (i + 1) * (8 << 20) / 240e6 - time.monotonic()
    if d > 0:
        time.sleep(d)
os.close(fd)
print(f"{mode}: {n * 8 / 1024} GiB in {time.monotonic() - t0:.1f} s", file=sys.stderr)
