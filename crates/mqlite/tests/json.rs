//! Typed bodies: a value sent as JSON comes back as its type; a body of another shape is
//! an InvalidArgument naming the type, not a panic.

use mqlite::{Engine, Error, OutMessage, QueueConfig};
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u64,
    items: Vec<String>,
}

#[tokio::test]
async fn a_value_goes_in_as_json_and_comes_out_as_its_type() {
    let mq = Engine::open(":memory:").await.expect("open");
    let orders = mq.queue("orders");
    mq.create_queue("orders", QueueConfig::default())
        .await
        .expect("queue");
    let order = Order {
        id: 42,
        items: vec!["tea".into(), "scones".into()],
    };
    orders.send_json(&order).await.expect("send");
    mq.send("orders", OutMessage::new("not json"))
        .await
        .expect("send");
    let m = orders.receive_one().await.expect("receive").expect("one");
    assert_eq!(m.content.content_type.as_deref(), Some("application/json"));
    assert_eq!(m.json::<Order>().expect("an Order"), order);
    let bad = orders.receive_one().await.expect("receive").expect("two");
    match bad.json::<Order>() {
        Err(e @ Error::InvalidArgument(_)) => assert!(e.to_string().contains("Order"), "{e}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    mq.close().await;
}
