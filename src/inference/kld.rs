//! Reading `llama-perplexity --kl-divergence`'s summary: the KL divergence of each token's
//! distribution from the base run's, and how often both put the same token on top.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The numbers of one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Divergence {
    pub mean_kld: f64,
    pub max_kld: f64,
    /// The 99.9th percentile.
    pub kld_p999: Option<f64>,
    /// Percent of tokens whose most likely next token is the same in both runs.
    pub same_top_percent: f64,
}

/// The first number of `rest` (`  0.001234 ±  0.000010` → 0.001234).
fn number(rest: &str) -> Option<f64> {
    rest.split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
}

/// The summary of a `--kl-divergence` run's output, when it printed one.
pub fn parse(output: &str) -> Option<Divergence> {
    let mut mean = None;
    let mut max = None;
    let mut p999 = None;
    let mut top = None;
    for line in output.lines() {
        let l = line.trim();
        if let Some(r) = l.strip_prefix("Mean    KLD:") {
            mean = number(r);
        } else if let Some(r) = l.strip_prefix("Maximum KLD:") {
            max = number(r);
        } else if let Some(r) = l.strip_prefix("99.9%   KLD:") {
            p999 = number(r);
        } else if let Some(r) = l.strip_prefix("Same top p:") {
            top = number(r);
        }
    }
    Some(Divergence {
        mean_kld: mean?,
        max_kld: max?,
        kld_p999: p999,
        same_top_percent: top?,
    })
}

/// `Final estimate: PPL = 12.3456 +/- 0.1` of a plain perplexity run.
pub fn perplexity(output: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|l| l.split_once("Final estimate: PPL = "))
        .and_then(|(_, r)| number(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_summary_perplexity_prints() {
        let out = "chunk PPL ...\n====== KL divergence statistics ======\nMean    KLD:   0.000123 ±   0.000004\nMaximum KLD:   0.012000\n99.9%   KLD:   0.004000\n99.0%   KLD:   0.001000\n\n====== Token probability statistics ======\nSame top p: 99.512 ± 0.123 %\n";
        let d = parse(out).expect("summary");
        assert_eq!(d.mean_kld, 0.000123);
        assert_eq!(d.max_kld, 0.012);
        assert_eq!(d.kld_p999, Some(0.004));
        assert_eq!(d.same_top_percent, 99.512);
        assert!(parse("Mean    KLD:   nan ± nan\nMaximum KLD: 1\nSame top p: 3 %").is_none());
        assert!(parse("no summary").is_none());
        assert_eq!(
            perplexity("Final estimate: PPL = 12.3456 +/- 0.10000"),
            Some(12.3456)
        );
    }
}
