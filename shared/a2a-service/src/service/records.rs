//! Reading what happened on a task: the agent's transcript (for its participants) and the
//! audit log (for its admins), each paged by entry number.
//!
//! The store port reads a transcript from an entry number to its end and the audit log whole,
//! so a page reads from its token on and keeps the first `pageSize` entries: a late page of a
//! long record costs the reading of the rest of it (docs/storage.md).

use task_core::policy::Action;

use super::base::Service;
use crate::api::{AuditLogPage, RecordsPage, TaskRecordsRequest, TranscriptEntry, TranscriptPage};
use crate::error::ServiceError;
use crate::identity::Who;

/// Entries per page when the caller does not say.
const DEFAULT_PAGE_SIZE: usize = 50;
/// The most entries a page may ask for.
const MAX_PAGE_SIZE: i32 = 100;
/// The longest page token: a `u64` in decimal.
const MAX_TOKEN_DIGITS: usize = 20;

/// Where a page starts and how many entries it holds at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Page {
    from: u64,
    size: usize,
}

impl Page {
    /// The page a request asks for, or invalid params naming what is wrong.
    fn of(req: &TaskRecordsRequest) -> Result<Page, ServiceError> {
        let size = match req.page_size {
            None => DEFAULT_PAGE_SIZE,
            Some(n) if (1..=MAX_PAGE_SIZE).contains(&n) => n as usize,
            Some(n) => {
                return Err(ServiceError::InvalidParams(format!(
                    "pageSize must be between 1 and {MAX_PAGE_SIZE} (got {n})"
                )));
            }
        };
        let from = match req.page_token.as_deref().filter(|t| !t.is_empty()) {
            None => 0,
            Some(token) => parse_token(token).ok_or_else(|| {
                ServiceError::InvalidParams(
                    "pageToken is not a nextPageToken this method gave".to_owned(),
                )
            })?,
        };
        Ok(Page { from, size })
    }

    /// Keeps the page's entries of `rest` (the record from `self.from` on) and says where the
    /// next page starts: empty when this one reaches the end.
    fn cut<T>(self, rest: &mut Vec<T>) -> String {
        if rest.len() > self.size {
            rest.truncate(self.size);
            (self.from + self.size as u64).to_string()
        } else {
            String::new()
        }
    }

    fn finish<T>(self, task_id: String, mut rest: Vec<T>) -> RecordsPage<T> {
        let next_page_token = self.cut(&mut rest);
        RecordsPage {
            task_id,
            entries: rest,
            next_page_token,
        }
    }
}

/// An entry number written in decimal digits only (no sign, no spaces).
fn parse_token(token: &str) -> Option<u64> {
    if token.len() > MAX_TOKEN_DIGITS || !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}

impl Service {
    /// GetTaskTranscript: who may read the task (GetTask's check) may read its transcript.
    pub(super) async fn transcript_page(
        &self,
        caller: &Who,
        req: TaskRecordsRequest,
    ) -> Result<TranscriptPage, ServiceError> {
        let page = Page::of(&req)?;
        let stored = self.visible(&req.id, caller).await?;
        let entries = self
            .store
            .transcript(&stored.record.id, page.from)
            .await?
            .into_iter()
            .zip(page.from..)
            .map(|(entry, number)| TranscriptEntry { number, entry })
            .collect();
        Ok(page.finish(req.id, entries))
    }

    /// GetTaskAuditLog: admins only; anyone else is told the task does not exist.
    pub(super) async fn audit_page(
        &self,
        caller: &Who,
        req: TaskRecordsRequest,
    ) -> Result<AuditLogPage, ServiceError> {
        let page = Page::of(&req)?;
        let stored = self.allowed(&req.id, caller, Action::ReadAudit).await?;
        let skip = usize::try_from(page.from).unwrap_or(usize::MAX);
        let entries = self
            .store
            .audit(&stored.record.id)
            .await?
            .into_iter()
            .skip(skip)
            .collect();
        Ok(page.finish(req.id, entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(page_size: Option<i32>, page_token: Option<&str>) -> TaskRecordsRequest {
        TaskRecordsRequest {
            id: "t".to_owned(),
            page_size,
            page_token: page_token.map(str::to_owned),
        }
    }

    fn refusal(page_size: Option<i32>, page_token: Option<&str>) -> String {
        match Page::of(&req(page_size, page_token)) {
            Err(ServiceError::InvalidParams(text)) => text,
            other => panic!("not invalid params: {other:?}"),
        }
    }

    #[test]
    fn a_page_defaults_to_fifty_from_the_first_entry() {
        assert_eq!(
            Page::of(&req(None, None)).ok(),
            Some(Page { from: 0, size: 50 })
        );
        assert_eq!(
            Page::of(&req(Some(100), Some(""))).ok(),
            Some(Page { from: 0, size: 100 })
        );
        assert_eq!(
            Page::of(&req(Some(1), Some("7"))).ok(),
            Some(Page { from: 7, size: 1 })
        );
    }

    #[test]
    fn a_page_size_outside_1_to_100_is_refused() {
        for n in [0, -1, 101] {
            assert_eq!(
                refusal(Some(n), None),
                format!("pageSize must be between 1 and 100 (got {n})")
            );
        }
    }

    #[test]
    fn only_a_decimal_entry_number_is_a_token() {
        for bad in [
            "x",
            "-1",
            "+1",
            " 1",
            "1.0",
            "99999999999999999999",
            "123456789012345678901",
        ] {
            assert_eq!(
                refusal(None, Some(bad)),
                "pageToken is not a nextPageToken this method gave",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_page_says_where_the_next_starts_until_the_end() {
        let page = Page { from: 4, size: 2 };
        let mut rest = vec![4, 5, 6];
        assert_eq!(page.cut(&mut rest), "6");
        assert_eq!(rest, [4, 5]);
        let mut rest = vec![4, 5];
        assert_eq!(page.cut(&mut rest), "");
        assert_eq!(rest, [4, 5]);
    }
}
