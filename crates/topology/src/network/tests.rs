use super::*;

#[test]
fn smoke() {
    for p in networks() {
        let n = p.network().unwrap_or_else(|e| panic!("{e}"));
        println!("{}", describe_network(&n));
    }
}
