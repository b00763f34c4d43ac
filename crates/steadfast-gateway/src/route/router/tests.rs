//! The router's unit tests: names, relists.
use super::*;
use serde_json::json;

fn router_with(names: &[&str]) -> (Arc<Router>, Arc<Route>) {
    let config = Arc::new(crate::Config::default());
    let set = UpstreamSet::Named(vec![crate::config::NamedUpstream {
        name: "c".into(),
        spec: steadfast_mcp::Upstream::command("true", Vec::<String>::new()),
        budget: None,
    }]);
    let router =
        Router::build(set, &config, &crate::route::shared::SharedState::default()).unwrap();
    let route = router.first();
    let tools: Vec<_> = names.iter().map(|n| json!({"name": n})).collect();
    route.upstream.learn_tools(&json!({ "tools": tools }), true);
    (router, route)
}

#[test]
fn colliding_names_get_the_same_names_whatever_the_order() {
    for order in [["get_file", "get.file"], ["get.file", "get_file"]] {
        let (router, route) = router_with(&order);
        let named: Vec<String> = order
            .iter()
            .map(|o| router.expose(&route, Kind::Tool, o).unwrap())
            .collect();
        let plain = if order[0] == "get_file" {
            &named[0]
        } else {
            &named[1]
        };
        let other = if order[0] == "get_file" {
            &named[1]
        } else {
            &named[0]
        };
        assert_eq!(plain, "c_get_file");
        assert!(other.starts_with("c_get_file-"), "{other}");
        assert_eq!(
            router.resolve(Kind::Tool, other).map(|(_, o)| o).as_deref(),
            Some("get.file")
        );
    }
}

#[tokio::test(start_paused = true)]
async fn relists_for_unknown_uris_are_single_flight_and_rate_bounded() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let gate = Arc::new(RelistGate::default());
    let runs = Arc::new(AtomicUsize::new(0));
    let relist = |runs: Arc<AtomicUsize>| async move {
        runs.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    // 20 misses at once: one relist; the others wait for it and do not start their own.
    let misses: Vec<_> = (0..20)
        .map(|_| {
            let (gate, runs) = (gate.clone(), runs.clone());
            tokio::spawn(async move { gate.run(|| false, relist(runs)).await })
        })
        .collect();
    let mut ran = 0;
    for m in misses {
        ran += usize::from(m.await.unwrap());
    }
    assert_eq!((ran, runs.load(Ordering::SeqCst)), (1, 1));
    // Within RELIST_EVERY of its end, none; after it, one again.
    tokio::time::advance(RELIST_EVERY - Duration::from_millis(1)).await;
    assert!(!gate.run(|| false, relist(runs.clone())).await);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(gate.run(|| false, relist(runs.clone())).await);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // Found meanwhile (another's relist taught it): no relist, whatever the time.
    tokio::time::advance(RELIST_EVERY * 2).await;
    assert!(!gate.run(|| true, relist(runs.clone())).await);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_relist_replaces_what_the_previous_list_taught() {
    let (router, route) = router_with(&[]);
    for i in 0..MAX_NAMES {
        router.expose(&route, Kind::Prompt, &format!("p{i}"));
    }
    // Full: a new name is not remembered, so a rewritten one resolves wrongly.
    router.expose(&route, Kind::Prompt, "get.file");
    let wrong = router
        .resolve(Kind::Prompt, "c_get_file")
        .map(|(_, o)| o.into_owned());
    assert_eq!(wrong.as_deref(), Some("get_file"));
    let relisted = HashMap::from([("c_get_file".to_owned(), "get.file".to_owned())]);
    router.relisted(&route, Relisted::Names(Kind::Prompt, relisted));
    let (_, original) = router.resolve(Kind::Prompt, "c_get_file").unwrap();
    assert_eq!(original, "get.file");
    assert_eq!(route.names.read().unwrap().prompts.len(), 1);
    router.relisted(&route, Relisted::Uris(HashSet::from(["a://1".to_owned()])));
    assert!(router.route_uri("a://1").is_some());
    router.relisted(&route, Relisted::Uris(HashSet::new()));
    assert!(router.route_uri("a://1").is_none());
}

#[test]
fn a_rewritten_name_resolves_before_any_client_listed_it() {
    let (router, _) = router_with(&["files.read"]);
    let (_, original) = router.resolve(Kind::Tool, "c_files_read").unwrap();
    assert_eq!(original, "files.read");
    let (_, original) = router.resolve(Kind::Tool, "c_not_listed").unwrap();
    assert_eq!(original, "not_listed");
    assert!(router.resolve(Kind::Tool, "d_x").is_none());
}
