//! The trigger gate in front of the scan (`sanitize/gate.rs`) must change nothing: with
//! and without it, every text comes back the same. It is exact only if every match of every
//! rule has a trigger near its start, so these tests put every message of every set through
//! both, alone, behind long clean text (where the gate skips), glued together, and in random
//! mixtures of their pieces.

#[path = "support/sanitize_fakes.rs"]
mod fakes;
#[path = "support/generic_fill.rs"]
mod fill;
#[path = "support/generic_heldout.rs"]
mod generic_heldout;
#[path = "support/generic_tuning.rs"]
mod generic_tuning;
#[path = "support/places_heldout.rs"]
mod places_heldout;
#[path = "support/places_tuning.rs"]
mod places_tuning;

use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use steadfast::Sanitizer;

/// (gated, ungated) with the generic layer, then without it. The gated ones search region by
/// region even where the regions cover most of the text (by default such a text is searched
/// whole, which is the ungated search).
static PAIRS: LazyLock<[(Sanitizer, Sanitizer); 2]> = LazyLock::new(|| {
    let pair = |generic| {
        (
            Sanitizer::builder()
                .generic_layer(generic)
                .dense_switch(false)
                .build()
                .unwrap(),
            Sanitizer::builder()
                .generic_layer(generic)
                .prefilter(false)
                .build()
                .unwrap(),
        )
    };
    [pair(true), pair(false)]
});

/// Every message of every set, filled with made-up values, and each fake credential in a few
/// contexts.
static MESSAGES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut all: Vec<String> = Vec::new();
    let templates = places_heldout::SECRETS
        .iter()
        .chain(places_heldout::LOOKALIKES)
        .chain(places_tuning::SECRETS)
        .chain(places_tuning::LOOKALIKES)
        .map(|(_, t)| *t)
        .chain(generic_heldout::SECRETS.iter().copied())
        .chain(generic_heldout::LOOKALIKES.iter().copied())
        .chain(generic_tuning::SECRETS.iter().copied())
        .chain(generic_tuning::LOOKALIKES.iter().copied());
    for (i, t) in templates.enumerate() {
        all.push(fill::fill(t, i as u64).text);
    }
    // Markup whose value spans more words and lines than a window reaches by its boundaries:
    // the window goes on to the element's next `<`.
    let words: Vec<String> = (0..30).map(|i| format!("w{i}x")).collect();
    for name in ["dsn", "db_password", "ConnectionString", "signature"] {
        all.push(format!("<{name}>{}</{name}>", words.join("\n")));
        all.push(format!("<{name}>{}</{name}>", words.join(" \n ")));
        all.push(format!(
            "<{name} a=\"1\"\n{}>q8Zx7R2pLk5TfW3n<",
            words.join("\n")
        ));
    }
    // A value 80 bytes of one-letter attributes after its name, behind long spaces.
    all.push(format!(
        "<add key=\"ApiSecret\" {}value     =     \"q8Zx7R2pLk5TfW3n\"/>",
        "a ".repeat(38)
    ));
    for (_, _, secret) in fakes::fakes() {
        for context in [
            "{}",
            "key={}",
            "got {} back",
            "\"token\": \"{}\"",
            "x{}y",
            "é{}中",
        ] {
            all.push(context.replace("{}", &secret));
        }
    }
    all
});

const CLEAN: &str =
    "Rate limit exceeded, retry in 30 seconds\nUser alice is not a member of team platform\n";

fn assert_same(text: &str) {
    for (gated, ungated) in PAIRS.iter() {
        let want = ungated.sanitize(text);
        let got = gated.sanitize(text);
        assert_eq!(got, want, "the gate changed the result on {text:?}");
    }
}

#[test]
fn every_message_comes_back_the_same() {
    assert!(MESSAGES.len() > 500, "{}", MESSAGES.len());
    let padding = CLEAN.repeat(8);
    for m in MESSAGES.iter() {
        assert_same(m);
        // Behind clean text the gate skips to the message; behind spaces and a long word the
        // window has to reach back over them.
        assert_same(&format!("{padding}{m}"));
        assert_same(&format!("{padding}{m}\n{padding}"));
        assert_same(&format!("{}{m}", " ".repeat(300)));
        assert_same(&format!("{}{m}", "x".repeat(300)));
    }
}

#[test]
fn messages_glued_come_back_the_same() {
    // In groups (all of them in one text takes minutes in a debug build): a window that
    // reaches into the message before or after.
    for group in MESSAGES.chunks(40) {
        assert_same(&group.join("\n"));
        assert_same(&group.join(" "));
        assert_same(&group.concat());
    }
}

#[test]
fn clean_text_costs_the_gate_alone() {
    // No trigger in ordinary error text: the big automaton never runs on it.
    let s = Sanitizer::default_rules();
    let text = CLEAN.repeat(100);
    assert_eq!(s.scan_work(&text), text.len());
}

/// Pieces of the messages (cut at spaces and at random points), separators, and random text.
fn piece() -> impl Strategy<Value = String> {
    let words: Vec<String> = MESSAGES
        .iter()
        .flat_map(|m| {
            m.split_inclusive(' ')
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let messages: Vec<String> = MESSAGES.clone();
    prop_oneof![
        proptest::sample::select(words),
        (
            proptest::sample::select(messages),
            any::<proptest::sample::Index>()
        )
            .prop_map(|(m, i)| {
                let cut = i.index(m.len() + 1);
                let cut = (cut..=m.len())
                    .find(|&c| m.is_char_boundary(c))
                    .unwrap_or(0);
                m[cut..].to_owned()
            }),
        proptest::sample::select(vec![
            " ", "\n", "\t", "=", ":", "\"", "'", "(", "<", ">", "/", "é", "中", "    ", "\n  ",
        ])
        .prop_map(str::to_owned),
        "\\PC{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/sanitize_prefilter.txt"
        ))),
        ..ProptestConfig::default()
    })]

    /// Random mixtures of message pieces come back the same with and without the gate.
    #[test]
    fn mixtures_come_back_the_same(parts in proptest::collection::vec(piece(), 1..12)) {
        let text = parts.concat();
        for (gated, ungated) in PAIRS.iter() {
            prop_assert_eq!(gated.sanitize(&text), ungated.sanitize(&text), "{:?}", text);
        }
    }

    /// Arbitrary text too.
    #[test]
    fn any_text_comes_back_the_same(text in any::<String>()) {
        for (gated, ungated) in PAIRS.iter() {
            prop_assert_eq!(gated.sanitize(&text), ungated.sanitize(&text), "{:?}", text);
        }
    }
}
