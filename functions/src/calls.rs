//! What a function asks of DynamoDB, in its log: every operation at `debug` (target
//! `functions::dynamodb_calls`), with the function's name. An operator turns it on to see a
//! request's storage traffic; the end-to-end test turns it on to check each function's calls
//! against the policy the template gives it.

use aws_sdk_dynamodb::config::{
    ConfigBag, Intercept, RuntimeComponents, interceptors::BeforeSerializationInterceptorContextRef,
};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;

/// The interceptor that logs each operation once, before it is serialised (so retries of one
/// call are not counted again).
#[derive(Debug)]
pub struct DynamoDbCallLog {
    function: String,
}

impl DynamoDbCallLog {
    /// Named after the running function (`AWS_LAMBDA_FUNCTION_NAME`).
    pub fn from_env() -> Self {
        Self::named(std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_default())
    }

    pub fn named(function: impl Into<String>) -> Self {
        Self {
            function: function.into(),
        }
    }
}

impl Intercept for DynamoDbCallLog {
    fn name(&self) -> &'static str {
        "DynamoDbCallLog"
    }

    // The operation's metadata is in the bag from this hook on (not yet at
    // `read_before_execution`).
    fn read_before_serialization(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(metadata) = cfg.load::<Metadata>() {
            tracing::debug!(
                target: "functions::dynamodb_calls",
                function = %self.function,
                operation = metadata.name(),
                "dynamodb call"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::DynamoDbCallLog;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// One line per operation, with its name, even when the call fails and is retried.
    #[tokio::test(flavor = "current_thread")]
    async fn each_operation_is_logged_once_with_its_name() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_env_filter("functions::dynamodb_calls=debug")
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        // Nothing listens on port 1: every attempt fails to connect, at once.
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:1")
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "a", "b", None, None, "test",
            ))
            .retry_config(
                aws_sdk_dynamodb::config::retry::RetryConfig::standard()
                    .with_max_attempts(2)
                    .with_initial_backoff(std::time::Duration::from_millis(1)),
            )
            .interceptor(DynamoDbCallLog::named("list-tasks"))
            .build();
        let client = aws_sdk_dynamodb::Client::from_conf(config);
        assert!(client.list_tables().send().await.is_err());
        assert!(
            client
                .describe_table()
                .table_name("t")
                .send()
                .await
                .is_err()
        );

        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let calls: Vec<(String, String)> = log
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|entry| entry["fields"]["message"] == "dynamodb call")
            .map(|entry| {
                let fields = &entry["fields"];
                (
                    fields["function"].as_str().unwrap().to_owned(),
                    fields["operation"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            calls,
            [
                ("list-tasks".to_owned(), "ListTables".to_owned()),
                ("list-tasks".to_owned(), "DescribeTable".to_owned())
            ],
            "{log}"
        );
    }
}
