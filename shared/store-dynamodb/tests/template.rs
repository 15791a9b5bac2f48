//! The table `infra/template.yaml` defines is the one the adapter uses: same key
//! attributes, same indexes, same TTL attribute. (No endpoint needed.)

mod common;

use store_dynamodb::schema;

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

#[test]
fn the_template_defines_exactly_the_table_the_adapter_uses() {
    let def = common::table_definition();
    let mut attributes = def.attributes.clone();
    attributes.sort();
    let mut expected: Vec<_> = schema::KEY_ATTRIBUTES
        .iter()
        .map(|a| pair(a, "S"))
        .collect();
    expected.sort();
    assert_eq!(
        attributes, expected,
        "AttributeDefinitions: every key attribute, all strings, nothing else"
    );
    assert_eq!(
        def.keys,
        vec![pair(schema::PK, "HASH"), pair(schema::SK, "RANGE")]
    );
    let indexes: Vec<store_dynamodb::table::Index> = schema::INDEXES
        .iter()
        .map(|i| store_dynamodb::table::Index {
            name: i.name.to_owned(),
            keys: vec![pair(i.partition_key, "HASH"), pair(i.sort_key, "RANGE")],
            projection: i.projection.to_owned(),
        })
        .collect();
    assert_eq!(def.indexes, indexes);
    assert_eq!(def.ttl_attribute.as_deref(), Some(schema::TTL));
    assert_eq!(def.billing_mode, "PAY_PER_REQUEST");
    assert_eq!(def.stream_view_type.as_deref(), Some("NEW_IMAGE"));
    assert!(def.point_in_time_recovery);
}

#[test]
fn the_template_is_a_sam_template_that_outputs_the_table_name() {
    let template = common::template();
    assert_eq!(
        template["Transform"].as_str(),
        Some("AWS::Serverless-2016-10-31")
    );
    // `Value: !Ref TasksTable` parses as a tagged value.
    let output = format!("{:?}", template["Outputs"]["TasksTableName"]["Value"]);
    assert!(
        output.contains("Ref") && output.contains(schema::TEMPLATE_RESOURCE),
        "{output}"
    );
}
