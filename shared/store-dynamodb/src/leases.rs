//! `LeaseStore`: one conditional single-item write per operation; GSI2 lists expired leases.
//!
//! Expiry follows [`Lease::expired`] (`expires_at <= now`), the rule of every adapter, in
//! exactly two places: [`TAKE_CONDITION`] (acquire) and [`EXPIRED_KEY_CONDITION`] (the sweep).

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Duration, Utc};
use task_store::{Conflict, Lease, LeaseStore, StoreError, StoreResult};

use crate::DynamoDbStore;
use crate::calls::Kind;
use crate::error::DynamoDbError;
use crate::items::{self, Item, attr, n, s};
use crate::keys;
use crate::schema::{GSI2, GSI2_PK, GSI2_SK, LEASE_PARTITION, PK};

/// When `acquire` may put its lease item: no lease, or one that expired at `:now`
/// ([`Lease::expired`]: `expires_at <= now`, both in epoch milliseconds).
const TAKE_CONDITION: &str = "attribute_not_exists(#pk) OR #expires <= :now";

/// Which GSI2 keys `expired_leases` lists: those below [`keys::lease_index_bound`] of `:now`,
/// which are the leases expiring at or before `now` ([`Lease::expired`]).
const EXPIRED_KEY_CONDITION: &str = "#gpk = :lease AND #gsk < :bound";

/// `now + ttl`, at the millisecond precision the lease item keeps.
fn expiry(now: DateTime<Utc>, ttl: Duration) -> StoreResult<(DateTime<Utc>, u64)> {
    let at = now
        .checked_add_signed(ttl)
        .ok_or_else(|| StoreError::Invalid(format!("lease expiry {now} + {ttl} overflows")))?;
    let millis = keys::epoch_millis(at);
    let at = i64::try_from(millis)
        .ok()
        .and_then(DateTime::from_timestamp_millis)
        .unwrap_or(at);
    Ok((at, millis))
}

fn millis_to_time(item: &Item) -> Result<DateTime<Utc>, DynamoDbError> {
    let millis: i64 = items::get_n(item, attr::EXPIRES_AT)?;
    DateTime::from_timestamp_millis(millis).ok_or_else(|| {
        DynamoDbError::corrupt(items::describe_key(item), "lease expiry out of range")
    })
}

#[async_trait]
impl LeaseStore for DynamoDbStore {
    async fn acquire(
        &self,
        task_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        ttl: Duration,
    ) -> StoreResult<Lease> {
        let (expires_at, _) = expiry(now, ttl)?;
        let token = uuid::Uuid::new_v4().to_string();
        let lease = Lease {
            task_id: task_id.to_owned(),
            owner: owner.to_owned(),
            token: token.clone(),
            expires_at,
        };
        let item = items::lease_item(&lease);
        let put = self
            .client
            .put_item()
            .table_name(&*self.table)
            .set_item(Some(item))
            .condition_expression(TAKE_CONDITION)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#expires", attr::EXPIRES_AT)
            .expression_attribute_values(":now", n(keys::epoch_millis(now)))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let err = match put.clone().send().await {
                Ok(out) => {
                    self.count(Kind::Write, out.consumed_capacity());
                    return Ok(lease);
                }
                Err(err) => err,
            };
            let Some(PutItemError::ConditionalCheckFailedException(e)) = err.as_service_error()
            else {
                return Err(DynamoDbError::call("PutItem", err).into());
            };
            let holder = match e.item() {
                Some(item) => Some(item.clone()),
                // No item returned (an emulator may not): read the holder.
                None => self.get_item(items::lease_key(task_id)).await?,
            };
            match holder {
                // Our own write, which landed before an SDK retry repeated it.
                Some(holder) if items::get_s(&holder, attr::TOKEN)? == token => return Ok(lease),
                Some(holder) => {
                    let expires_at = millis_to_time(&holder)?;
                    return Err(Conflict::LeaseHeld {
                        task_id: task_id.to_owned(),
                        expires_at,
                    }
                    .into());
                }
                // Released in between: try again.
                None if attempt < 3 => continue,
                None => {
                    let expires_at = now;
                    return Err(Conflict::LeaseHeld {
                        task_id: task_id.to_owned(),
                        expires_at,
                    }
                    .into());
                }
            }
        }
    }

    async fn renew(&self, lease: &Lease, now: DateTime<Utc>, ttl: Duration) -> StoreResult<Lease> {
        let (expires_at, millis) = expiry(now, ttl)?;
        let mut update = self
            .client
            .update_item()
            .table_name(&*self.table)
            .set_key(Some(items::lease_key(&lease.task_id)))
            .update_expression(
                "SET #expires = :expires, #gsi2pk = :gsi2pk, #gsi2sk = :gsi2sk, #ttl = :ttl",
            )
            .condition_expression("#owner = :owner AND #token = :token")
            .expression_attribute_names("#owner", attr::OWNER)
            .expression_attribute_names("#token", attr::TOKEN)
            .expression_attribute_values(":owner", s(lease.owner.clone()))
            .expression_attribute_values(":token", s(lease.token.clone()))
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        for ((name, value), (name_placeholder, value_placeholder)) in
            items::expiry_attributes(&lease.task_id, millis)
                .into_iter()
                .zip([
                    ("#expires", ":expires"),
                    ("#gsi2pk", ":gsi2pk"),
                    ("#gsi2sk", ":gsi2sk"),
                    ("#ttl", ":ttl"),
                ])
        {
            update = update
                .expression_attribute_names(name_placeholder, name)
                .expression_attribute_values(value_placeholder, value);
        }
        match update.send().await {
            Ok(out) => {
                self.count(Kind::Write, out.consumed_capacity());
                Ok(Lease {
                    expires_at,
                    ..lease.clone()
                })
            }
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(_)) => {
                    Err(Conflict::LeaseLost(lease.task_id.clone()).into())
                }
                _ => Err(DynamoDbError::call("UpdateItem", err).into()),
            },
        }
    }

    async fn release(&self, lease: &Lease) -> StoreResult<()> {
        let result = self
            .client
            .delete_item()
            .table_name(&*self.table)
            .set_key(Some(items::lease_key(&lease.task_id)))
            .condition_expression("#owner = :owner AND #token = :token")
            .expression_attribute_names("#owner", attr::OWNER)
            .expression_attribute_names("#token", attr::TOKEN)
            .expression_attribute_values(":owner", s(lease.owner.clone()))
            .expression_attribute_values(":token", s(lease.token.clone()))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.count(Kind::Write, out.consumed_capacity());
                Ok(())
            }
            Err(err) => match err.as_service_error() {
                Some(DeleteItemError::ConditionalCheckFailedException(_)) => {
                    Err(Conflict::LeaseLost(lease.task_id.clone()).into())
                }
                _ => Err(DynamoDbError::call("DeleteItem", err).into()),
            },
        }
    }

    async fn expired_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<String>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let query = self
            .query()
            .index_name(GSI2)
            .key_condition_expression(EXPIRED_KEY_CONDITION)
            .expression_attribute_names("#gpk", GSI2_PK)
            .expression_attribute_names("#gsk", GSI2_SK)
            .expression_attribute_values(":lease", s(LEASE_PARTITION))
            .expression_attribute_values(
                ":bound",
                s(keys::lease_index_bound(keys::epoch_millis(now))),
            )
            .limit(i32::try_from(limit).unwrap_or(i32::MAX).min(1000));
        let mut expired = Vec::with_capacity(limit);
        let mut start = None;
        loop {
            let out = self
                .query_page(query.clone().set_exclusive_start_key(start))
                .await?;
            for item in out.items() {
                let pk = items::get_s(item, PK)?;
                let task = pk.strip_prefix("TASK#").ok_or_else(|| {
                    DynamoDbError::corrupt(items::describe_key(item), "lease of no task")
                })?;
                expired.push(task.to_owned());
                if expired.len() == limit {
                    return Ok(expired);
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(expired),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn expiries_keep_milliseconds() {
        let now = Utc.timestamp_opt(1_790_000_000, 123_456_789).unwrap();
        let (at, millis) = expiry(now, Duration::seconds(30)).unwrap();
        assert_eq!(millis, 1_790_000_030_123);
        assert_eq!(at, Utc.timestamp_opt(1_790_000_030, 123_000_000).unwrap());
        let [(_, expires), _, (_, gsi2sk), (_, ttl)] = items::expiry_attributes("t-1", millis);
        assert_eq!(expires, n(1_790_000_030_123u64));
        assert_eq!(gsi2sk, s("00000001790000030123#t-1"));
        assert_eq!(ttl, n(1_790_000_030u64 + 7 * 86_400));
    }

    /// The condition of `acquire` and the key bound of `expired_leases` agree with
    /// `Lease::expired` at the boundary, for `now` on and between whole milliseconds.
    #[test]
    fn acquire_and_sweep_apply_lease_expired() {
        assert!(TAKE_CONDITION.ends_with("#expires <= :now"));
        assert!(EXPIRED_KEY_CONDITION.ends_with("#gsk < :bound"));
        let base = Utc.timestamp_opt(1_790_000_000, 0).unwrap();
        for now_nanos in [0, 1, 999_999] {
            let now = base + Duration::nanoseconds(now_nanos);
            for offset in [-2, -1, 0, 1, 2] {
                let (expires_at, millis) = expiry(base, Duration::milliseconds(offset)).unwrap();
                let expired = Lease::expired(expires_at, now);
                assert_eq!(
                    expired,
                    offset <= 0,
                    "offset {offset} ms, now +{now_nanos} ns"
                );
                // `#expires <= :now`, with the values `acquire` binds.
                let takeable = millis <= keys::epoch_millis(now);
                assert_eq!(takeable, expired, "acquire at offset {offset} ms");
                // `#gsk < :bound`, with the key the lease item carries.
                let (_, gsi2sk) = items::expiry_attributes("t-1", millis)[2].clone();
                let listed = gsi2sk.as_s().unwrap().as_str()
                    < keys::lease_index_bound(keys::epoch_millis(now)).as_str();
                assert_eq!(listed, expired, "sweep at offset {offset} ms");
            }
        }
    }
}
