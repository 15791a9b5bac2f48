//! The verified principal an authorizer put in the request context (SPEC section 4).
//!
//! Where each front door puts it:
//! - API Gateway REST API (payload v1), Cognito user-pool authorizer:
//!   `requestContext.authorizer.claims.sub`;
//! - REST API, Lambda (token or request) authorizer: `requestContext.authorizer.principalId`;
//! - HTTP API or Function URL (payload v2), JWT authorizer:
//!   `requestContext.authorizer.jwt.claims.sub`;
//! - v2, Lambda authorizer: `requestContext.authorizer.lambda.principalId` (or `.sub`);
//! - v2, IAM (a Function URL with `AWS_IAM`): `requestContext.authorizer.iam.userArn`.

use std::collections::HashMap;

use lambda_http::aws_lambda_events::apigw::ApiGatewayRequestAuthorizer;
use lambda_http::request::RequestContext;
use serde_json::Value;

fn non_empty(value: Option<&str>) -> Option<String> {
    value.filter(|v| !v.is_empty()).map(str::to_owned)
}

/// `sub`, else `principalId`, of an authorizer's free-form fields.
fn from_fields(fields: &HashMap<String, Value>) -> Option<String> {
    let claims_sub = fields
        .get("claims")
        .and_then(|c| c.get("sub"))
        .and_then(Value::as_str);
    non_empty(claims_sub)
        .or_else(|| non_empty(fields.get("principalId").and_then(Value::as_str)))
        .or_else(|| non_empty(fields.get("sub").and_then(Value::as_str)))
}

fn from_authorizer(authorizer: &ApiGatewayRequestAuthorizer) -> Option<String> {
    authorizer
        .jwt
        .as_ref()
        .and_then(|jwt| non_empty(jwt.claims.get("sub").map(String::as_str)))
        .or_else(|| from_fields(&authorizer.fields))
        .or_else(|| {
            authorizer
                .iam
                .as_ref()
                .and_then(|iam| non_empty(iam.user_arn.as_deref()))
        })
}

/// The verified principal of the request, if an authorizer left one.
pub fn verified_principal(context: Option<&RequestContext>) -> Option<String> {
    match context? {
        RequestContext::ApiGatewayV1(ctx) => from_authorizer(&ctx.authorizer),
        RequestContext::ApiGatewayV2(ctx) => ctx.authorizer.as_ref().and_then(from_authorizer),
        // Only the two API Gateway payloads are compiled in (REST and HTTP/Function URL).
        _ => None,
    }
}
