//! Run leases: acquire, renew, release, expiry ([`crate::Lease::expired`]), a lease taken
//! with a creation and given up with an update.

use std::sync::Arc;

use a2a::TaskState;
use chrono::Duration;

use super::fixtures::{TEAM, at, conflict, create_new, record, snapshot, user_message};
use crate::error::Conflict;
use crate::model::*;
use crate::port::Store;

/// A task created with its run lease is leased exactly as if `acquire` had taken it.
pub async fn a_task_is_created_with_its_lease(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Working, at(0));
    let lease = Lease {
        task_id: "t-1".into(),
        owner: "creator".into(),
        token: "token-1".into(),
        expires_at: at(30),
    };
    let mut new = NewTask::new(rec.clone());
    new.events.push(snapshot(&rec));
    new.lease = Some(lease.clone());
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    assert_eq!(
        conflict(
            store
                .acquire("t-1", "other", at(10), Duration::seconds(30))
                .await
        ),
        Conflict::LeaseHeld {
            task_id: "t-1".into(),
            expires_at: at(30)
        }
    );
    let renewed = store
        .renew(&lease, at(20), Duration::seconds(30))
        .await
        .expect("the creator holds it");
    assert_eq!(renewed.expires_at, at(50));
    assert_eq!(
        store.expired_leases(at(51), 10).await.expect("expired"),
        vec!["t-1".to_owned()]
    );
    store.release(&renewed).await.expect("release");
    store
        .acquire("t-1", "other", at(21), Duration::seconds(30))
        .await
        .expect("free after release");

    // A creation that fails writes no lease either.
    let mut again = NewTask::new(rec);
    again.lease = Some(Lease {
        token: "token-2".into(),
        ..lease
    });
    assert_eq!(
        conflict(store.commit(vec![Change::Create(Box::new(again))]).await),
        Conflict::TaskExists("t-1".into())
    );
}

/// An update may end its runner's run: the lease it names is given up once the update is
/// applied, unless another runner holds the task by then (that lease stays, and the update is
/// applied all the same).
pub async fn an_update_gives_up_the_runners_lease(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Working, at(0));
    let lease = Lease {
        task_id: "t-1".into(),
        owner: "runner-a".into(),
        token: "token-1".into(),
        expires_at: at(30),
    };
    let mut new = NewTask::new(rec);
    new.lease = Some(lease.clone());
    let base = create_new(&*store, new).await;
    let mut update = TaskUpdate::new(base);
    update.history = vec![user_message("m-1", "last")];
    update.release = Some(lease.clone());
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .expect("the last write of the run");
    let b = store
        .acquire("t-1", "runner-b", at(10), Duration::seconds(30))
        .await
        .expect("given up with the update, long before it expired");

    // Runner A's lease is gone; runner B's stays when A names its old lease again.
    let base = store.get("t-1").await.expect("get").expect("exists");
    let mut late = TaskUpdate::new(base);
    late.history = vec![user_message("m-2", "late")];
    late.release = Some(lease);
    store
        .commit(vec![Change::Update(Box::new(late))])
        .await
        .expect("not refused for a lease it no longer holds");
    assert_eq!(
        conflict(
            store
                .acquire("t-1", "runner-c", at(20), Duration::seconds(30))
                .await
        ),
        Conflict::LeaseHeld {
            task_id: "t-1".into(),
            expires_at: b.expires_at
        }
    );
    let history = store.history("t-1", None).await.expect("history");
    assert_eq!(history.len(), 2, "both updates applied");
}

pub async fn leases(store: Arc<dyn Store>) {
    let ttl = Duration::seconds(30);
    let a = store
        .acquire("t-1", "runner-a", at(0), ttl)
        .await
        .expect("free");
    assert_eq!((a.owner.as_str(), a.expires_at), ("runner-a", at(30)));
    let held = store.acquire("t-1", "runner-b", at(10), ttl).await;
    assert_eq!(
        conflict(held),
        Conflict::LeaseHeld {
            task_id: "t-1".into(),
            expires_at: at(30)
        }
    );
    let a = store.renew(&a, at(20), ttl).await.expect("renew");
    assert_eq!(a.expires_at, at(50));
    assert!(
        store
            .expired_leases(at(40), 10)
            .await
            .expect("expired")
            .is_empty()
    );
    // Lease::expired: a lease is over from the instant it expires, for the sweep as for
    // acquire.
    assert_eq!(
        store.expired_leases(at(50), 10).await.expect("expired"),
        vec!["t-1".to_owned()]
    );
    assert_eq!(
        store.expired_leases(at(51), 10).await.expect("expired"),
        vec!["t-1".to_owned()]
    );

    // After expiry another runner may steal it; the old holder has lost it.
    let b = store
        .acquire("t-1", "runner-b", at(51), ttl)
        .await
        .expect("steal an expired lease");
    assert_eq!(
        conflict(store.renew(&a, at(52), ttl).await),
        Conflict::LeaseLost("t-1".into())
    );
    assert_eq!(
        conflict(store.release(&a).await),
        Conflict::LeaseLost("t-1".into())
    );
    // The same owner acquiring again gets a new token; the old token is lost.
    store.release(&b).await.expect("release");
    assert_eq!(
        conflict(store.release(&b).await),
        Conflict::LeaseLost("t-1".into())
    );
    let b2 = store
        .acquire("t-1", "runner-b", at(60), ttl)
        .await
        .expect("free again");
    assert_ne!(b2.token, b.token);
    assert_eq!(
        conflict(store.renew(&b, at(61), ttl).await),
        Conflict::LeaseLost("t-1".into())
    );
    store
        .acquire("t-2", "runner-c", at(0), Duration::seconds(1))
        .await
        .expect("another task");
    assert_eq!(
        store.expired_leases(at(100), 10).await.expect("expired"),
        vec!["t-2".to_owned(), "t-1".to_owned()]
    );
    assert_eq!(
        store.expired_leases(at(100), 1).await.expect("expired"),
        vec!["t-2".to_owned()]
    );
}
