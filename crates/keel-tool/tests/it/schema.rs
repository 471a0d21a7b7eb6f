//! Schemas derived for tool arguments follow the rules both providers impose.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use keel_provider::ToolDefinition;
use keel_tool::{
    RegistryError, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, normalize_schema,
    schema_for, validate_definition,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// How to sort.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Order {
    /// Newest first.
    Newest,
    /// Oldest first.
    Oldest,
}

/// Where to look.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Scope {
    /// Directories to search, relative to the workspace.
    dirs: Vec<String>,
    /// How deep to go.
    depth: Option<u8>,
}

/// Arguments of a search tool (this doc comment is not sent: the tool's description is).
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct SearchArgs {
    /// The regular expression to look for.
    pattern: String,
    /// Where to look: the directories to search
    /// and how deep to go.
    ///
    /// Searches every directory when empty.
    scope: Scope,
    /// The most matches to return.
    limit: Option<u32>,
    /// Skip this many matches.
    #[serde(default)]
    offset: u64,
    /// How to order the files.
    order: Option<Order>,
    /// Extra labels.
    labels: Option<HashMap<String, String>>,
    /// Case-insensitive.
    ignore_case: bool,
}

fn keys(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                keys(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

#[test]
fn derived_schema_follows_every_rule() {
    let schema = schema_for::<SearchArgs>();
    insta::assert_json_snapshot!("search_args_schema", schema);

    let mut all_keys = Vec::new();
    keys(&schema, &mut all_keys);
    for banned in ["$ref", "$defs", "$schema", "title"] {
        assert!(
            !all_keys.iter().any(|k| k == banned),
            "{banned} in {schema}"
        );
    }
    let text = schema.to_string();
    assert!(!text.contains("\"null\""), "null types remain: {text}");
    for format in ["uint32", "uint64", "uint8", "int64"] {
        assert!(!text.contains(format), "format {format} remains: {text}");
    }
    // Fields in declared order.
    let names: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        [
            "pattern",
            "scope",
            "limit",
            "offset",
            "order",
            "labels",
            "ignore_case"
        ]
    );
    // Optional (and defaulted) fields are simply not required.
    assert_eq!(
        schema["required"],
        json!(["pattern", "scope", "ignore_case"])
    );
    assert_eq!(schema["properties"]["scope"]["required"], json!(["dirs"]));
    // Structs are closed; maps stay open.
    assert_eq!(schema["additionalProperties"], json!(false));
    assert_eq!(
        schema["properties"]["scope"]["additionalProperties"],
        json!(false)
    );
    assert_eq!(
        schema["properties"]["labels"]["additionalProperties"],
        json!({"type": "string"})
    );
    // Doc comments are descriptions; the root's own is dropped.
    assert_eq!(
        schema["properties"]["pattern"]["description"],
        "The regular expression to look for."
    );
    assert!(schema.get("description").is_none());
    // Wrapped doc lines are joined; paragraphs stay apart.
    assert_eq!(
        schema["properties"]["scope"]["description"],
        "Where to look: the directories to search and how deep to go.\n\nSearches every directory when empty."
    );
    assert_eq!(schema["properties"]["limit"]["type"], "integer");
    assert_eq!(schema["properties"]["order"]["type"], "string");
}

#[test]
fn foreign_schemas_are_normalized_the_same_way() {
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Args",
        "type": "object",
        "properties": {
            "path": {"type": "string", "title": "Path"},
            "line": {"type": ["integer", "null"], "format": "uint32", "default": null},
            "mode": {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}], "description": "Mode"}
        },
        "required": ["path", "line"]
    });
    normalize_schema(&mut schema);
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "line": {"type": "integer"},
                "mode": {"description": "Mode", "type": "string", "enum": ["a", "b"]}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    );
}

fn definition(name: &str, schema: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: "d".into(),
        input_schema: schema,
    }
}

#[test]
fn provider_rules_are_checked() {
    let object = json!({"type": "object", "properties": {}});
    assert!(validate_definition(&definition("read_file", object.clone())).is_ok());
    assert!(validate_definition(&definition(&"a".repeat(64), object.clone())).is_ok());
    for bad in ["", "read file", "read.file", "λ", &"a".repeat(65)] {
        assert!(
            validate_definition(&definition(bad, object.clone())).is_err(),
            "{bad:?}"
        );
    }
    let cases = [
        (
            json!({"type": "string"}),
            "the input schema must have \"type\": \"object\" at the top",
        ),
        (json!([]), "the input schema must be a JSON object"),
        (
            json!({"type": "object", "oneOf": [{}, {}]}),
            "the input schema may not use oneOf at the top",
        ),
        (
            json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/Node"}}}),
            "the input schema may not contain $ref (recursive types cannot be inlined)",
        ),
    ];
    for (schema, reason) in cases {
        assert_eq!(
            validate_definition(&definition("t", schema)),
            Err(reason.to_owned())
        );
    }
}

/// A tree: recursive, so its schema cannot be inlined.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Node {
    children: Vec<Node>,
}

struct TreeTool;

impl Tool for TreeTool {
    type Args = Node;
    const NAME: &'static str = "tree";
    fn description(&self) -> &str {
        "Takes a tree."
    }
    async fn call(&self, _args: Node, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

#[test]
fn a_tool_whose_schema_breaks_the_rules_is_refused_at_registration() {
    let err = ToolRegistry::new().with(TreeTool).unwrap_err();
    assert_eq!(
        err,
        RegistryError::InvalidDefinition {
            name: "tree".into(),
            reason: "the input schema may not contain $ref (recursive types cannot be inlined)"
                .into()
        }
    );
}
