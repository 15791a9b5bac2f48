//! The template's front door against the code: `AuthMode` defaults to `jwt` and jwt without an
//! issuer and an audience is refused by a rule; API Gateway caches the authorizer's answer at
//! most 60 s; every function (the authorizer included) sees one `TH_AGENT_ID`; the stage's
//! throttling comes from parameters; the optional per-IP WAF rule exists only when asked for;
//! and each 429 (API Gateway's THROTTLED, WAF's block) carries `Retry-After` and the very
//! JSON-RPC error the service answers for a rate limit (`ProtocolError::rate_limited`).

use a2a_http::{ErrorKind, ProtocolError};
use functions::authorizer::LEEWAY_SECS;
use serde_json::json;
use serde_yaml_ng::Value;

use crate::common::template::{read, text, untagged};

/// The longest authorizer cache allowed: a cached Allow outlives the token's `exp` by this.
pub const MAX_AUTHORIZER_CACHE_SECS: f64 = 60.0;
/// The evaluation windows AWS WAF's rate-based rules accept.
const WAF_WINDOWS: [u64; 4] = [60, 120, 300, 600];

/// A number, written as one (`60`) or as a string (`"0"`).
fn number(value: &Value) -> Option<f64> {
    match untagged(value) {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// `!Ref name`?
fn is_ref(value: &Value, name: &str) -> bool {
    matches!(value, Value::Tagged(t) if t.tag == "Ref" && text(&t.value) == name)
}

/// The JSON-RPC error response the service sends when it rate-limits a request, with the id
/// it cannot know in front of the service (null).
fn rate_limited_body(retry_after_secs: u64) -> serde_json::Value {
    let error = ProtocolError::rate_limited(retry_after_secs).to_jsonrpc_error();
    json!({"jsonrpc": "2.0", "id": null, "error": error})
}

/// `body` is JSON and the service's rate-limit answer for `retry_after_secs`.
fn check_rate_limited_body(
    problems: &mut Vec<String>,
    what: &str,
    body: &str,
    retry_after_secs: u64,
) {
    match serde_json::from_str::<serde_json::Value>(body) {
        Err(e) => problems.push(format!("{what}: the body is not JSON: {e}")),
        Ok(body) => {
            // -32000: the code the service gives rate limits (and the issue asks for).
            let code = ErrorKind::RateLimited.mapping().jsonrpc_code;
            if code != -32000 || body["error"]["code"] != code {
                problems.push(format!("{what}: the error code is not -32000"));
            }
            if body != rate_limited_body(retry_after_secs) {
                problems.push(format!(
                    "{what}: the body is not the service's rate-limit error: {body}"
                ));
            }
        }
    }
}

/// Every way the template's front door differs from what the code and the issue require.
pub fn problems(template: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let parameters = &template["Parameters"];
    let resources = &template["Resources"];
    let api = &resources["Api"]["Properties"];
    let body = &api["DefinitionBody"];

    // Authentication: jwt unless `none` is chosen, and jwt needs its issuer and audience.
    let auth = &parameters["AuthMode"];
    if auth["Default"].as_str() != Some("jwt") {
        problems.push("AuthMode does not default to jwt".into());
    }
    let rule = serde_yaml_ng::to_string(&template["Rules"]["JwtNeedsIssuerAndAudience"])
        .unwrap_or_default();
    if !["AuthMode", "jwt", "JwtIssuer", "JwtAudience", "Assert"]
        .iter()
        .all(|word| rule.contains(word))
    {
        problems.push("no rule refuses AuthMode jwt without JwtIssuer and JwtAudience".into());
    }

    // The authorizer's cache: at most 60 s, from the parameter.
    let cache = &parameters["AuthorizerCacheSeconds"];
    let bounded = [&cache["Default"], &cache["MaxValue"]]
        .iter()
        .all(|v| number(v).is_some_and(|n| n <= MAX_AUTHORIZER_CACHE_SECS))
        && number(&cache["MinValue"]) == Some(0.0);
    if !bounded {
        problems.push("AuthorizerCacheSeconds is not bounded to 0..=60".into());
    }
    if !text(&cache["Description"]).contains(&format!("{LEEWAY_SECS} s leeway")) {
        problems.push(format!(
            "AuthorizerCacheSeconds does not state the authorizer's {LEEWAY_SECS} s leeway"
        ));
    }
    let ttl = &body["components"]["securitySchemes"]["jwt"]["x-amazon-apigateway-authorizer"]["authorizerResultTtlInSeconds"];
    let ttl_ok = is_ref(ttl, "AuthorizerCacheSeconds")
        || number(ttl).is_some_and(|n| n <= MAX_AUTHORIZER_CACHE_SECS);
    if !ttl_ok {
        problems.push(format!(
            "the authorizer's results are cached for {ttl:?}, not AuthorizerCacheSeconds (<= 60)"
        ));
    }

    // One agent id for every function: the authorizer refuses it as a subject.
    let agent_id = &template["Globals"]["Function"]["Environment"]["Variables"]["TH_AGENT_ID"];
    if agent_id.as_str().is_none_or(str::is_empty) {
        problems.push("the functions' Globals set no TH_AGENT_ID".into());
    }
    for (id, resource) in resources.as_mapping().into_iter().flatten() {
        if resource["Properties"]["Environment"]["Variables"]
            .get("TH_AGENT_ID")
            .is_some()
        {
            problems.push(format!("{}: a TH_AGENT_ID of its own", text(id)));
        }
    }

    // Stage throttling from the parameters.
    let settings = api["MethodSettings"]
        .as_sequence()
        .cloned()
        .unwrap_or_default();
    let everything = settings
        .iter()
        .find(|s| text(&s["ResourcePath"]) == "/*" && text(&s["HttpMethod"]) == "*");
    for (property, parameter) in [
        ("ThrottlingRateLimit", "ApiThrottlingRateLimit"),
        ("ThrottlingBurstLimit", "ApiThrottlingBurstLimit"),
    ] {
        if !everything.is_some_and(|s| is_ref(&s[property], parameter)) {
            problems.push(format!("the stage's {property} is not !Ref {parameter}"));
        }
        let p = &parameters[parameter];
        if p["Type"].as_str() != Some("Number")
            || !number(&p["MinValue"]).is_some_and(|n| n >= 1.0)
            || !number(&p["Default"]).is_some_and(|n| n >= 1.0)
        {
            problems.push(format!("{parameter} is not a number of at least 1"));
        }
    }

    // API Gateway's own 429.
    let throttled = &body["x-amazon-apigateway-gateway-responses"]["THROTTLED"];
    if number(&throttled["statusCode"]) != Some(429.0) {
        problems.push("THROTTLED does not answer 429".into());
    }
    let retry = text(&throttled["responseParameters"]["gatewayresponse.header.Retry-After"]);
    match retry.trim_matches('\'').parse::<u64>() {
        Ok(secs) if retry.starts_with('\'') && retry.ends_with('\'') && secs >= 1 => {
            let template = text(&throttled["responseTemplates"]["application/json"]);
            check_rate_limited_body(&mut problems, "THROTTLED", &template, secs);
        }
        _ => problems.push(format!(
            "THROTTLED: Retry-After is {retry:?}, not a quoted number of seconds"
        )),
    }

    // WAF, only with WafRateLimit > 0.
    let condition = serde_yaml_ng::to_string(&template["Conditions"]["HasWaf"]).unwrap_or_default();
    if !(condition.contains("Not")
        && condition.contains("WafRateLimit")
        && condition.contains("'0'"))
    {
        problems.push("HasWaf is not `WafRateLimit != 0`".into());
    }
    if text(&parameters["WafRateLimit"]["Default"]) != "0" {
        problems.push("WafRateLimit does not default to 0 (no web ACL)".into());
    }
    let windows: Vec<u64> = parameters["WafRateWindowSeconds"]["AllowedValues"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|v| number(v).map(|n| n as u64))
        .collect();
    if windows.is_empty() || windows.iter().any(|w| !WAF_WINDOWS.contains(w)) {
        problems.push(format!(
            "WafRateWindowSeconds allows {windows:?}, not WAF's {WAF_WINDOWS:?}"
        ));
    }
    for (id, kind) in [
        ("WebAcl", "AWS::WAFv2::WebACL"),
        ("WebAclAssociation", "AWS::WAFv2::WebACLAssociation"),
    ] {
        let resource = &resources[id];
        if resource["Type"].as_str() != Some(kind) {
            problems.push(format!("no {kind} {id}"));
        } else if resource["Condition"].as_str() != Some("HasWaf") {
            problems.push(format!("{id} is not conditional on HasWaf"));
        }
    }
    let acl = &resources["WebAcl"]["Properties"];
    if acl["Scope"].as_str() != Some("REGIONAL") {
        problems.push("the web ACL is not REGIONAL (an API Gateway stage needs REGIONAL)".into());
    }
    let rules = acl["Rules"].as_sequence().cloned().unwrap_or_default();
    let rate_rule = rules
        .iter()
        .find(|r| r["Statement"].get("RateBasedStatement").is_some());
    match rate_rule {
        None => problems.push("the web ACL has no rate-based rule".into()),
        Some(rule) => {
            let statement = &rule["Statement"]["RateBasedStatement"];
            if statement["AggregateKeyType"].as_str() != Some("IP")
                || !is_ref(&statement["Limit"], "WafRateLimit")
                || !is_ref(&statement["EvaluationWindowSec"], "WafRateWindowSeconds")
            {
                problems.push(
                    "the rate rule is not per IP, WafRateLimit per WafRateWindowSeconds".into(),
                );
            }
            let response = &rule["Action"]["Block"]["CustomResponse"];
            if number(&response["ResponseCode"]) != Some(429.0) {
                problems.push("the rate rule does not answer 429".into());
            }
            let retry_after = response["ResponseHeaders"]
                .as_sequence()
                .into_iter()
                .flatten()
                .find(|h| text(&h["Name"]).eq_ignore_ascii_case("Retry-After"));
            if !retry_after.is_some_and(|h| is_ref(&h["Value"], "WafRateWindowSeconds")) {
                problems.push("the rate rule's Retry-After is not the window".into());
            }
            let key = text(&response["CustomResponseBodyKey"]);
            let custom = &acl["CustomResponseBodies"][key.as_str()];
            if custom["ContentType"].as_str() != Some("APPLICATION_JSON") {
                problems.push(format!("the WAF body {key:?} is not APPLICATION_JSON"));
            }
            for window in &windows {
                let content = text(&custom["Content"])
                    .replace("${WafRateWindowSeconds}", &window.to_string());
                check_rate_limited_body(
                    &mut problems,
                    &format!("the WAF block (window {window} s)"),
                    &content,
                    *window,
                );
            }
        }
    }
    let association = &resources["WebAclAssociation"]["Properties"];
    if !text(&association["ResourceArn"]).contains("/restapis/${Api}/stages/")
        || text(&association["WebACLArn"]) != "WebAcl.Arn"
    {
        problems.push("the web ACL is not associated with the API's stage".into());
    }

    // What deploys the template without a JWT issuer says so.
    if !read("localstack/deploy.sh").contains("AuthMode=none") {
        problems.push("localstack/deploy.sh does not pass AuthMode=none".into());
    }
    problems
}
