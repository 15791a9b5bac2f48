//! Setting up: the SDK configuration of every client ([`sdk_config`]), and the task table as
//! `infra/template.yaml` defines it, and creating it from that definition:
//! the tests make one table per test this way, and a developer can make one on DynamoDB
//! Local (`local-server --store dynamodb --create-table`). The template is the one place the
//! table is defined; this module only reads it.

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, IndexStatus, KeySchemaElement, KeyType,
    Projection, ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TableStatus, TimeToLiveSpecification,
};
use aws_smithy_http_client::tls;
use serde_yaml_ng::Value;

use crate::schema;

/// The SDK configuration every client of the service uses: behavior version latest, an
/// HTTPS client on rustls with ring (no aws-lc, no OpenSSL), standard retries (throttling,
/// 5xx and transport errors, 4 attempts with jittered backoff), and bounded timeouts.
/// Region, credentials and endpoint come from the environment as usual.
pub async fn sdk_config() -> aws_config::SdkConfig {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client)
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(4)
                .with_initial_backoff(Duration::from_millis(50)),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(10))
                .build(),
        )
        .load()
        .await
}

/// `infra/template.yaml`, embedded so a binary can create its table without the source tree.
pub const TEMPLATE: &str = include_str!("../../../infra/template.yaml");

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    pub name: String,
    /// (attribute, HASH|RANGE)
    pub keys: Vec<(String, String)>,
    pub projection: String,
}

/// `Resources.TasksTable.Properties`, as far as creating the table needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDefinition {
    /// (attribute, S|N|B)
    pub attributes: Vec<(String, String)>,
    pub keys: Vec<(String, String)>,
    pub indexes: Vec<Index>,
    pub billing_mode: String,
    pub stream_view_type: Option<String>,
    pub ttl_attribute: Option<String>,
    pub point_in_time_recovery: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("infra/template.yaml: {0}")]
    Template(String),
    #[error("{operation} {table}: {message}")]
    Call {
        operation: &'static str,
        table: String,
        message: String,
    },
    #[error("table {0} did not become active in 2 minutes")]
    NotActive(String),
}

/// The template as YAML. CloudFormation's short-form tags (`!Ref`, `!GetAtt`, …) parse as
/// tagged values, which nothing here needs to read.
pub fn template() -> Result<Value, TableError> {
    serde_yaml_ng::from_str(TEMPLATE).map_err(|e| TableError::Template(e.to_string()))
}

fn text(value: &Value, what: &str) -> Result<String, TableError> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| TableError::Template(format!("{what} is not a string")))
}

fn pairs(list: &Value, name: &str, kind: &str) -> Result<Vec<(String, String)>, TableError> {
    list.as_sequence()
        .ok_or_else(|| TableError::Template(format!("{name} is not a list")))?
        .iter()
        .map(|e| {
            Ok((
                text(&e["AttributeName"], "AttributeName")?,
                text(&e[kind], kind)?,
            ))
        })
        .collect()
}

impl TableDefinition {
    /// The definition of `TasksTable` in the embedded template.
    pub fn from_template() -> Result<Self, TableError> {
        let template = template()?;
        let table = &template["Resources"][schema::TEMPLATE_RESOURCE];
        if table["Type"].as_str() != Some("AWS::DynamoDB::Table") {
            return Err(TableError::Template(format!(
                "{} is not an AWS::DynamoDB::Table",
                schema::TEMPLATE_RESOURCE
            )));
        }
        let p = &table["Properties"];
        let indexes = match p["GlobalSecondaryIndexes"].as_sequence() {
            None => Vec::new(),
            Some(list) => list
                .iter()
                .map(|gsi| {
                    Ok(Index {
                        name: text(&gsi["IndexName"], "IndexName")?,
                        keys: pairs(&gsi["KeySchema"], "KeySchema", "KeyType")?,
                        projection: text(&gsi["Projection"]["ProjectionType"], "ProjectionType")?,
                    })
                })
                .collect::<Result<_, TableError>>()?,
        };
        let ttl = &p["TimeToLiveSpecification"];
        Ok(Self {
            attributes: pairs(
                &p["AttributeDefinitions"],
                "AttributeDefinitions",
                "AttributeType",
            )?,
            keys: pairs(&p["KeySchema"], "KeySchema", "KeyType")?,
            indexes,
            billing_mode: text(&p["BillingMode"], "BillingMode")?,
            stream_view_type: p["StreamSpecification"]["StreamViewType"]
                .as_str()
                .map(str::to_owned),
            ttl_attribute: if ttl["Enabled"].as_bool() == Some(true) {
                Some(text(&ttl["AttributeName"], "TTL AttributeName")?)
            } else {
                None
            },
            point_in_time_recovery: enabled_by_default(
                &template,
                &p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"],
            ),
        })
    }
}

/// `true`, or a `!Ref` to a template parameter whose default is `"true"`.
fn enabled_by_default(template: &serde_yaml_ng::Value, value: &serde_yaml_ng::Value) -> bool {
    match value {
        serde_yaml_ng::Value::Bool(on) => *on,
        serde_yaml_ng::Value::Tagged(tagged) if tagged.tag == "Ref" => tagged
            .value
            .as_str()
            .is_some_and(|name| template["Parameters"][name]["Default"].as_str() == Some("true")),
        _ => false,
    }
}

fn key_schema(keys: &[(String, String)]) -> Result<Vec<KeySchemaElement>, TableError> {
    keys.iter()
        .map(|(name, kind)| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(KeyType::from(kind.as_str()))
                .build()
                .map_err(|e| TableError::Template(e.to_string()))
        })
        .collect()
}

fn call_error(operation: &'static str, table: &str, err: impl std::error::Error) -> TableError {
    TableError::Call {
        operation,
        table: table.to_owned(),
        message: DisplayErrorContext(&err).to_string(),
    }
}

/// Creates `name` from the template's definition and waits until it and its indexes are
/// active. TTL is switched on as the template says; point-in-time recovery is left to the
/// deployment (it means nothing on an emulator).
pub async fn create_table(client: &Client, name: &str) -> Result<(), TableError> {
    let def = TableDefinition::from_template()?;
    let template_error =
        |e: aws_sdk_dynamodb::error::BuildError| TableError::Template(e.to_string());
    let mut create = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::from(def.billing_mode.as_str()))
        .set_key_schema(Some(key_schema(&def.keys)?));
    for (attribute, kind) in &def.attributes {
        create = create.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(attribute)
                .attribute_type(ScalarAttributeType::from(kind.as_str()))
                .build()
                .map_err(template_error)?,
        );
    }
    for index in &def.indexes {
        create = create.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(&index.name)
                .set_key_schema(Some(key_schema(&index.keys)?))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::from(index.projection.as_str()))
                        .build(),
                )
                .build()
                .map_err(template_error)?,
        );
    }
    if let Some(view) = &def.stream_view_type {
        create = create.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::from(view.as_str()))
                .build()
                .map_err(template_error)?,
        );
    }
    create
        .send()
        .await
        .map_err(|e| call_error("CreateTable", name, e))?;
    wait_active(client, name).await?;
    if let Some(attribute) = &def.ttl_attribute {
        let spec = TimeToLiveSpecification::builder()
            .attribute_name(attribute)
            .enabled(true)
            .build()
            .map_err(template_error)?;
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(spec)
            .send()
            .await
            .map_err(|e| call_error("UpdateTimeToLive", name, e))?;
    }
    Ok(())
}

/// Creates the table unless it exists already.
pub async fn ensure_table(client: &Client, name: &str) -> Result<(), TableError> {
    match client.describe_table().table_name(name).send().await {
        Ok(_) => wait_active(client, name).await,
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            create_table(client, name).await
        }
        Err(err) => Err(call_error("DescribeTable", name, err)),
    }
}

async fn wait_active(client: &Client, name: &str) -> Result<(), TableError> {
    for _ in 0..600 {
        let described = client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .map_err(|e| call_error("DescribeTable", name, e))?;
        if let Some(table) = described.table {
            let indexes_active = table
                .global_secondary_indexes()
                .iter()
                .all(|i| i.index_status().is_none_or(|s| *s == IndexStatus::Active));
            if table.table_status() == Some(&TableStatus::Active) && indexes_active {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(TableError::NotActive(name.to_owned()))
}

/// Deletes a table (test clean-up).
pub async fn delete_table(client: &Client, name: &str) -> Result<(), TableError> {
    client
        .delete_table()
        .table_name(name)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| call_error("DeleteTable", name, e))
}
