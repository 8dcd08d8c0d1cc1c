//! What gpuprobe knows about llama.cpp itself: the option table by build range, and real
//! source trees (which options a checkout declares, and its build number where it can be known).

pub mod checkout;
pub mod options;

use std::collections::BTreeMap;

use checkout::Checkout;
use options::OptionTable;

/// The llama.cpp build a plan is for, and how to know which options it has.
#[derive(Debug, Clone)]
pub struct LlamaTarget {
    pub build: Option<u64>,
    /// How the build was chosen, for explanations: `--llama-build`, `checkout DIR`, `latest known`.
    pub source: String,
    pub checkout: Option<Checkout>,
}

impl LlamaTarget {
    /// Whether `name` is declared: from the checkout when there is one, else from the table.
    pub fn declares(&self, table: &OptionTable, name: &str) -> bool {
        match &self.checkout {
            Some(c) => c.declares(name),
            None => table.declared(name, self.effective_build(table)),
        }
    }

    pub fn default_of(&self, table: &OptionTable, name: &str) -> Option<String> {
        match &self.checkout {
            Some(c) => c.options.get(name).and_then(|o| o.default.clone()),
            None => table
                .default(name, self.effective_build(table))
                .map(str::to_string),
        }
    }

    /// The build number used for table look-ups and quirk ranges.
    pub fn effective_build(&self, table: &OptionTable) -> u64 {
        self.build.unwrap_or(table.meta.newest_build)
    }

    pub fn declared_names(&self, table: &OptionTable) -> BTreeMap<String, Option<String>> {
        match &self.checkout {
            Some(c) => c
                .options
                .iter()
                .map(|(k, v)| (k.clone(), v.default.clone()))
                .collect(),
            None => {
                let b = self.effective_build(table);
                table
                    .option
                    .iter()
                    .filter(|o| o.builds.contains_number(b))
                    .map(|o| {
                        (
                            o.name.clone(),
                            table.default(&o.name, b).map(str::to_string),
                        )
                    })
                    .collect()
            }
        }
    }
}
