//! Section 16: the transactional outbox (in_tx).

use mqlite_contract::{Error, OutMessage, QueueConfig, StoreTx};
use mqlite_engine::Engine;

use super::cancellation::cancel_at_pause;
use super::peek_all;
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "events";

async fn business_rows<F: Access>(mq: &Engine<F::Store>) -> mqlite_contract::Result<Vec<i64>> {
    mq.tx::<F::Native, _, _>(async |tx| F::business_rows(tx.native()).await)
        .await
}

/// 16.1 The application's row and its message commit together on Ok, and neither
/// survives an error, a panic or a cancellation before commit.
pub async fn p16_1_outbox_commits_both_or_neither<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let seq = mq
        .tx::<F::Native, _, _>(async |tx| {
            F::insert_business_row(tx.native(), 1).await?;
            tx.send(Q, OutMessage::new("order 1")).await
        })
        .await?;
    assert_eq!(business_rows::<F>(&mq).await?, vec![1]);
    assert_eq!(peek_all(&mq, Q).await?[0].seq, seq);

    // An error after both writes: neither.
    let failed = mq
        .tx::<F::Native, _, _>(async |tx| {
            F::insert_business_row(tx.native(), 2).await?;
            tx.send(Q, OutMessage::new("order 2")).await?;
            Err::<(), _>(Error::invalid("payment declined"))
        })
        .await;
    assert!(matches!(failed, Err(Error::InvalidArgument(_))));

    // A panic after both writes: neither, and the panic reaches the caller.
    let panicked = {
        let mq = mq.clone();
        tokio::spawn(async move {
            mq.tx::<F::Native, _, _>(async |tx| {
                F::insert_business_row(tx.native(), 3).await?;
                tx.send(Q, OutMessage::new("order 3")).await?;
                if tx.native().check_cancelled().is_ok() {
                    panic!("the application's code panicked mid-transaction");
                }
                Ok::<_, Error>(())
            })
            .await
        })
        .await
    };
    assert!(
        panicked.is_err_and(|e| e.is_panic()),
        "the panic is re-raised"
    );

    // A cancellation before commit: neither.
    cancel_at_pause(|pause| {
        mq.tx::<F::Native, _, _>(async move |tx| {
            F::insert_business_row(tx.native(), 4).await?;
            tx.send(Q, OutMessage::new("order 4")).await?;
            pause.here();
            Ok::<_, Error>(())
        })
    })
    .await?;

    assert_eq!(
        business_rows::<F>(&mq).await?,
        vec![1],
        "only the committed order"
    );
    let bodies: Vec<_> = peek_all(&mq, Q)
        .await?
        .into_iter()
        .map(|m| m.content.body)
        .collect();
    assert_eq!(
        bodies,
        vec![b"order 1".to_vec()],
        "only the committed event"
    );
    Ok(())
}

/// 16.2 The store's native handle works inside the transaction: the application's own
/// table, read-your-writes before commit, and nothing visible after a rollback.
pub async fn p16_2_native_handle_inside_the_transaction<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let seen = mq
        .tx::<F::Native, _, _>(async |tx| {
            F::insert_business_row(tx.native(), 7).await?;
            F::insert_business_row(tx.native(), 5).await?;
            let rows = F::business_rows(tx.native()).await?;
            tx.send(Q, OutMessage::new(format!("{rows:?}"))).await?;
            Err::<(), _>(Error::invalid(format!("{rows:?}")))
        })
        .await;
    match seen {
        Err(Error::InvalidArgument(rows)) => assert_eq!(rows, "[5, 7]", "reads its own writes"),
        other => return Err(format!("unexpected {other:?}").into()),
    }
    assert!(business_rows::<F>(&mq).await?.is_empty(), "rolled back");
    assert!(peek_all(&mq, Q).await?.is_empty());
    Ok(())
}
