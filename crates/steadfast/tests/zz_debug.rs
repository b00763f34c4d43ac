#[test]
fn dbg() {
    let s = steadfast::Sanitizer::default_rules();
    let r = steadfast::Sanitizer::rules_only();
    for t in std::env::var("DBG").unwrap().split("|||") {
        let t = t.replace("\\n", "\n");
        let once = s.sanitize(&t).into_owned();
        println!(
            "IN  {t:?}\nOUT {once:?}\n2ND {:?}\nRUL {:?}\n",
            s.sanitize(&once),
            r.sanitize(&t)
        );
    }
}
