#!/bin/sh
# Rewrites schemas/*.schema.json from gpuprobe's Rust types (the documents `detect --json`,
# `cmake-flags --format json` and `check-build --json` print). Run it after changing a field of
# those types, then commit schemas/; the drift test in tests/schemas.rs fails until then.
set -eu
cd "$(dirname "$0")/.."
GPUPROBE_BLESS_SCHEMAS=1 cargo test --quiet --test schemas committed_schemas_are_what_the_types_generate
echo "gen-schemas: schemas/ rewritten from the types; commit what changed"
