//! JSON Schemas of the documents gpuprobe writes, generated from the Rust types that write them.
//!
//! The schema files under `schemas/` are these functions' output, committed so that pipeline
//! authors can validate a document or generate types without building gpuprobe; a test fails
//! when the types and the committed files drift apart (`scripts/gen-schemas.sh` rewrites them).
//! Each document's `schema` field names its file: `gpuprobe.report/v1` →
//! `schemas/gpuprobe.report.v1.schema.json`.
//!
//! The same committed files are what gpuprobe holds a document it reads to
//! ([`crate::published::enforce`]).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

pub use crate::published::Document;

impl Document {
    /// The JSON Schema (draft 2020-12) of what gpuprobe writes: fields that are always written
    /// are required (an unknown value is `null`, never a missing field), except those with a serde
    /// default, which older documents of the same version may lack; fields added later keep the
    /// version, so objects stay open to properties this schema does not name.
    pub fn schema(self) -> Value {
        match self {
            Document::Report => generate::<crate::report::Report>(self),
            Document::Plan => generate::<crate::plan::Plan>(self),
            Document::CheckBuild => generate::<crate::check_build::CheckReport>(self),
            Document::Exercise => generate::<crate::check_build::exercise::Exercise>(self),
            Document::Inference => generate::<crate::inference::Inference>(self),
            Document::Prebuilt => generate::<crate::prebuilt::Outcome>(self),
        }
    }

    /// [`Document::schema`] as the committed file spells it (pretty, sorted keys, final newline).
    pub fn schema_text(self) -> String {
        let mut text = serde_json::to_string_pretty(&self.schema())
            .expect("a serde_json::Value always serialises");
        text.push('\n');
        text
    }
}

fn generate<T: JsonSchema>(doc: Document) -> Value {
    let schema = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Some(root) = value.as_object_mut() {
        root.insert("title".into(), Value::from(doc.id()));
        root.insert(
            "description".into(),
            Value::from(format!(
                "What `{}` prints. Generated from gpuprobe's Rust types.",
                doc.command()
            )),
        );
        // The `schema` field is the document's version tag: one exact value per schema.
        if let Some(field) = root
            .get_mut("properties")
            .and_then(|p| p.get_mut("schema"))
            .and_then(Value::as_object_mut)
        {
            field.remove("type");
            field.insert("const".into(), Value::from(doc.id()));
        }
    }
    optional_defaults(&mut value);
    sorted(value)
}

/// A field with a serde default is one documents written before it existed lack, and readers
/// fill in: optional, although this version always writes it (its schema says the default).
fn optional_defaults(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let defaulted: Vec<String> = map
                .get("properties")
                .and_then(Value::as_object)
                .map(|props| {
                    props
                        .iter()
                        .filter(|(_, p)| p.get("default").is_some())
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Array(required)) = map.get_mut("required") {
                required.retain(|r| !r.as_str().is_some_and(|r| defaulted.iter().any(|d| d == r)));
                if required.is_empty() {
                    map.remove("required");
                }
            }
            for v in map.values_mut() {
                optional_defaults(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(optional_defaults),
        _ => {}
    }
}

/// Keys in one order whatever serde_json's map type is, so the files diff cleanly.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_document_id_is_the_schema_constant_of_its_writer() {
        assert_eq!(Document::Report.id(), crate::report::SCHEMA);
        assert_eq!(Document::Plan.id(), crate::plan::SCHEMA);
        assert_eq!(Document::CheckBuild.id(), crate::check_build::SCHEMA);
        assert_eq!(
            Document::Exercise.id(),
            crate::check_build::exercise::SCHEMA
        );
        assert_eq!(Document::Inference.id(), crate::inference::SCHEMA);
        assert_eq!(Document::Prebuilt.id(), crate::prebuilt::SCHEMA);
    }

    #[test]
    fn defaulted_fields_are_optional() {
        let schema = Document::Report.schema();
        let required = schema["required"].as_array().unwrap();
        assert!(required.iter().any(|r| r == "devices"));
        assert!(!required.iter().any(|r| r == "peers"), "{required:?}");
        assert_eq!(
            schema["properties"]["peers"]["default"],
            serde_json::json!([])
        );
    }

    #[test]
    fn every_document_round_trips_its_id_and_pins_its_schema_field() {
        for doc in Document::ALL {
            assert_eq!(Document::from_id(doc.id()), Some(doc));
            let schema = doc.schema();
            assert_eq!(schema["properties"]["schema"]["const"], doc.id());
            assert!(
                schema["required"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|f| f == "schema")),
                "{}: `schema` must be required",
                doc.id()
            );
        }
    }
}
