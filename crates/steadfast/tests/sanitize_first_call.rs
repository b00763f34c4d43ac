//! The first call pays for compiling the rules: with the trigger gate, text without a trigger
//! never compiles them, and a text with one compiles the one automaton of every rule (the rules
//! alone, for their kept groups, only as they win spans).
//!
//! `cargo test -p steadfast --test sanitize_first_call -- --nocapture` prints what each step
//! cost in this build (a debug build is the one other crates' tests pay).

use std::time::Instant;

use steadfast::Sanitizer;

#[test]
fn clean_text_compiles_nothing_and_a_secret_compiles_the_automaton() {
    let t = Instant::now();
    let s = Sanitizer::builder().build().unwrap();
    let built = t.elapsed();
    let t = Instant::now();
    let clean =
        "Rate limit exceeded, retry in 30 seconds\nUser alice is not a member of team platform";
    assert_eq!(s.sanitize(clean), clean);
    let first_clean = t.elapsed();
    assert!(!s.is_compiled(), "clean text compiled the automaton");
    let t = Instant::now();
    assert_eq!(s.sanitize("password=hunter2"), "password=[redacted]");
    let first_secret = t.elapsed();
    assert!(s.is_compiled());
    let t = Instant::now();
    assert_eq!(
        s.sanitize("upload token is q8Zx7R2pLk5TfW3n"),
        "upload token is [redacted]"
    );
    let second_secret = t.elapsed();
    println!(
        "build {built:?}, first clean call {first_clean:?}, first call with a secret {first_secret:?}, \
         a second secret of another rule {second_secret:?}"
    );
}

#[test]
fn compile_all_compiles_up_front() {
    let s = Sanitizer::builder().build().unwrap();
    let t = Instant::now();
    s.compile_all();
    println!("compile_all {:?}", t.elapsed());
    assert!(s.is_compiled());
}
