//! The retry budget's seam for shared state. On tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::time::Duration;

use steadfast::{BudgetConfig, ErrorClass, Retry, RetryBudget, RetryPolicy, SharedBudget};

/// 0: let the local budget decide; 1: allow; 2: deny.
#[derive(Default)]
struct Fake {
    deposits: AtomicU32,
    asked: AtomicU32,
    answer: AtomicU8,
}

impl SharedBudget for Fake {
    fn deposited(&self) {
        self.deposits.fetch_add(1, Ordering::SeqCst);
    }
    fn try_withdraw(&self) -> Option<bool> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        match self.answer.load(Ordering::SeqCst) {
            0 => None,
            1 => Some(true),
            _ => Some(false),
        }
    }
}

fn budget() -> RetryBudget {
    RetryBudget::new(
        BudgetConfig::builder()
            .retry_ratio(0.5)
            .min_retries_per_sec(0.0)
            .build()
            .unwrap(),
    )
}

#[tokio::test(start_paused = true)]
async fn the_shared_budget_sees_every_call_and_decides_retries() {
    let (b, fake) = (budget(), Arc::new(Fake::default()));
    b.share(fake.clone()).unwrap();
    let retry = Retry::<(), ErrorClass>::new(
        RetryPolicy::builder()
            .max_attempts(5)
            .base_delay(Duration::from_millis(1))
            .build()
            .unwrap(),
    )
    .budget(b.clone());
    fake.answer.store(2, Ordering::SeqCst);
    let err = retry
        .run(|_| async { Err::<(), _>(ErrorClass::from_status(503)) })
        .await
        .unwrap_err();
    // The local budget held 0.5 of a retry (below one); with the shared one denying, no retry.
    assert_eq!(err.attempts(), 1);
    assert_eq!(fake.deposits.load(Ordering::SeqCst), 1);
    fake.answer.store(1, Ordering::SeqCst);
    let err = retry
        .run(|_| async { Err::<(), _>(ErrorClass::from_status(503)) })
        .await
        .unwrap_err();
    assert_eq!(err.attempts(), 5, "the shared budget allowed every retry");
    assert_eq!(
        fake.deposits.load(Ordering::SeqCst),
        2,
        "retries are not deposits"
    );
}

#[tokio::test(start_paused = true)]
async fn without_an_answer_the_local_budget_decides() {
    let (b, fake) = (budget(), Arc::new(Fake::default()));
    b.share(fake.clone()).unwrap();
    for _ in 0..4 {
        b.deposit();
    }
    assert!(b.try_withdraw() && b.try_withdraw());
    assert!(!b.try_withdraw());
    assert_eq!(fake.asked.load(Ordering::SeqCst), 3);
    assert!(b.share(fake).is_err(), "a budget shares once");
}
