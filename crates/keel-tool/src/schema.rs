//! JSON Schemas for tool arguments, derived with schemars and shaped to what Anthropic and
//! OpenAI accept.

use keel_provider::ToolDefinition;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// Integer and number formats schemars emits that are not JSON Schema formats.
const NONSTANDARD_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32", "uint64",
    "uint128", "float", "double",
];

/// Keywords whose value is one subschema.
const ONE_SCHEMA: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
];

/// Keywords whose value is an array of subschemas.
const SCHEMA_ARRAYS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];

/// Keywords whose value maps names to subschemas.
const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "$defs"];

/// The argument schema for `T`: draft 2020-12, subschemas inlined, no `$schema` or `title`,
/// `additionalProperties: false` on every struct, optional fields not required and without
/// `null` types, non-standard number formats removed, doc comments as `description`s, fields
/// in declared order.
pub fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema: Value = generator.into_root_schema_for::<T>().into();
    normalize_schema(&mut schema);
    schema
}

/// Applies the rules of [`schema_for`] to a schema from elsewhere (an MCP server, a file).
/// The root's own `description` is dropped too: the tool's description says it.
pub fn normalize_schema(schema: &mut Value) {
    if let Value::Object(root) = schema {
        root.remove("$schema");
        root.remove("description");
        if root
            .get("$defs")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            root.remove("$defs");
        }
    }
    normalize_node(schema);
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
        || schema.get("const").is_some_and(Value::is_null)
}

/// Whether a property's schema admits `null` (so the field is an `Option`).
fn is_nullable(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        _ => ["anyOf", "oneOf"].iter().any(|key| {
            schema
                .get(*key)
                .and_then(Value::as_array)
                .is_some_and(|options| options.iter().any(is_null_schema))
        }),
    }
}

fn normalize_node(node: &mut Value) {
    let Value::Object(map) = node else {
        return;
    };
    map.remove("title");
    if let Some(Value::String(description)) = map.get_mut("description") {
        *description = unwrap_lines(description);
    }
    if map.get("default").is_some_and(Value::is_null) {
        map.remove("default");
    }
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(options)) = map.get_mut(key) else {
            continue;
        };
        options.retain(|option| !is_null_schema(option));
        if options.len() == 1 {
            let only = options.remove(0);
            map.remove(key);
            if let Value::Object(only) = only {
                for (k, v) in only {
                    map.entry(k).or_insert(v);
                }
            }
        }
    }
    collapse_const_options(map);
    if let Some(Value::String(format)) = map.get("format")
        && NONSTANDARD_FORMATS.contains(&format.as_str())
    {
        map.remove("format");
    }
    // Optional fields are simply not required.
    let optional: Vec<String> = map
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .filter(|(_, schema)| is_nullable(schema))
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(required)) = map.get_mut("required") {
        required.retain(|name| {
            !name
                .as_str()
                .is_some_and(|n| optional.iter().any(|o| o == n))
        });
        if required.is_empty() {
            map.remove("required");
        }
    }
    if map.contains_key("properties") && !map.contains_key("additionalProperties") {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for_each_subschema(map, normalize_node);
}

/// Calls `f` on each subschema directly under `map` (`items`, `anyOf`'s options, each of
/// `properties`, ...), not on `map` itself.
fn for_each_subschema(map: &mut Map<String, Value>, mut f: impl FnMut(&mut Value)) {
    for key in ONE_SCHEMA {
        if let Some(child) = map.get_mut(*key) {
            f(child);
        }
    }
    for key in SCHEMA_ARRAYS {
        if let Some(Value::Array(children)) = map.get_mut(*key) {
            children.iter_mut().for_each(&mut f);
        }
    }
    for key in SCHEMA_MAPS {
        if let Some(Value::Object(children)) = map.get_mut(*key) {
            children.values_mut().for_each(&mut f);
        }
    }
}

/// `schema` without the `description` of any argument or nested schema: what a model with
/// little context is sent (a [`Brief`](crate::Brief) tool's schema). Types, enums, ranges,
/// defaults and required fields stay, so it accepts exactly what `schema` accepts; an
/// argument that is itself named `description` stays too.
///
/// ```
/// use serde_json::json;
///
/// let schema = json!({
///     "type": "object",
///     "properties": {
///         "path": {"type": "string", "description": "The file, relative to the root."},
///         "description": {"type": "string", "description": "What the change is for."}
///     },
///     "required": ["path"],
///     "additionalProperties": false
/// });
/// assert_eq!(
///     keel_tool::compact_schema(&schema),
///     json!({
///         "type": "object",
///         "properties": {"path": {"type": "string"}, "description": {"type": "string"}},
///         "required": ["path"],
///         "additionalProperties": false
///     })
/// );
/// ```
pub fn compact_schema(schema: &Value) -> Value {
    let mut compact = schema.clone();
    strip_descriptions(&mut compact);
    compact
}

/// Removes `description` from `node` and every subschema under it.
fn strip_descriptions(node: &mut Value) {
    let Value::Object(map) = node else {
        return;
    };
    map.remove("description");
    for_each_subschema(map, strip_descriptions);
}

/// Joins the lines of a wrapped doc comment into one, keeping blank-line paragraph breaks.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Turns `oneOf`/`anyOf` of constants of one type (what documented enum variants derive to)
/// into a plain `enum`, the form every provider and local model handles; the variants' docs
/// are appended to the description.
fn collapse_const_options(map: &mut Map<String, Value>) {
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(options)) = map.get(key) else {
            continue;
        };
        let kind = options.first().and_then(|o| o.get("type")).cloned();
        let consts: Option<Vec<(Value, Option<&str>)>> = options
            .iter()
            .map(|option| {
                let object = option.as_object()?;
                let known = object
                    .keys()
                    .all(|k| matches!(k.as_str(), "type" | "const" | "description"));
                (known && object.get("type") == kind.as_ref()).then(|| {
                    let value = object.get("const").cloned()?;
                    Some((value, object.get("description").and_then(Value::as_str)))
                })?
            })
            .collect();
        let (Some(consts), Some(kind)) = (consts, kind) else {
            continue;
        };
        let notes: Vec<String> = consts
            .iter()
            .filter_map(|(value, doc)| {
                doc.map(|doc| format!("{value}: {}", doc.trim_end_matches('.')))
            })
            .collect();
        let values: Vec<Value> = consts.into_iter().map(|(value, _)| value).collect();
        map.remove(key);
        map.insert("type".into(), kind);
        map.insert("enum".into(), Value::Array(values));
        if !notes.is_empty() {
            let notes = notes.join("; ");
            let description = match map.get("description").and_then(Value::as_str) {
                Some(text) => format!("{text} ({notes})"),
                None => notes,
            };
            map.insert("description".into(), Value::String(description));
        }
        return;
    }
}

/// Whether `name` is a tool name every provider accepts: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn find_ref(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(key, child)| key == "$ref" || key == "$dynamicRef" || find_ref(child)),
        Value::Array(items) => items.iter().any(find_ref),
        _ => false,
    }
}

/// Checks a definition against the rules both Anthropic and OpenAI impose on tools: a name
/// matching `^[a-zA-Z0-9_-]{1,64}$`, a schema that is an object with `type: object` at the
/// top, no `anyOf`/`oneOf`/`allOf` at the top, and no `$ref` anywhere.
pub fn validate_definition(definition: &ToolDefinition) -> Result<(), String> {
    if !is_valid_tool_name(&definition.name) {
        return Err(format!(
            "the name must be 1 to 64 letters, digits, '_' or '-', got {:?}",
            definition.name
        ));
    }
    let Some(schema) = definition.input_schema.as_object() else {
        return Err("the input schema must be a JSON object".into());
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the input schema must have \"type\": \"object\" at the top".into());
    }
    if let Some(key) = ["anyOf", "oneOf", "allOf"]
        .iter()
        .find(|key| schema.contains_key(**key))
    {
        return Err(format!("the input schema may not use {key} at the top"));
    }
    if find_ref(&definition.input_schema) {
        return Err(
            "the input schema may not contain $ref (recursive types cannot be inlined)".into(),
        );
    }
    Ok(())
}
