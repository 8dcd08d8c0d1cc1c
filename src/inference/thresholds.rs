//! When a configuration's output counts as the CPU's: limits derived from how far two CPU runs
//! that should agree (other thread count; flash attention against none) drift apart, never
//! tighter than a floor. A GPU computes in another order and sometimes another precision (f16
//! accumulation), so it may differ a little more than the CPU from itself; a wrong result (garbage
//! from a split, a stale buffer) moves the KL divergence by orders of magnitude.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::kld::Divergence;

/// The mean KL divergence allowed whatever the noise (nats).
pub const FLOOR_MEAN_KLD: f64 = 0.01;
/// The noise is multiplied by this to make the limit.
pub const NOISE_FACTOR: f64 = 10.0;
/// The top-token agreement required whatever the noise (percent).
pub const FLOOR_SAME_TOP: f64 = 95.0;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Thresholds {
    pub max_mean_kld: f64,
    pub min_same_top_percent: f64,
    /// The largest mean KL divergence between CPU runs (none when no noise run succeeded).
    pub noise_mean_kld: Option<f64>,
    pub noise_same_top_percent: Option<f64>,
    pub floor_mean_kld: f64,
    pub floor_same_top_percent: f64,
    /// The rule, in words.
    pub rule: String,
}

impl Thresholds {
    pub fn derive(noise: &[Divergence]) -> Thresholds {
        let noise_mean = noise.iter().map(|d| d.mean_kld).reduce(f64::max);
        let noise_top = noise.iter().map(|d| d.same_top_percent).reduce(f64::min);
        let max_mean_kld = FLOOR_MEAN_KLD.max(noise_mean.unwrap_or(0.0) * NOISE_FACTOR);
        // Twice the CPU's own disagreement, never above the floor's.
        let min_same_top_percent = noise_top
            .map(|t| FLOOR_SAME_TOP.min(100.0 - 2.0 * (100.0 - t)))
            .unwrap_or(FLOOR_SAME_TOP);
        Thresholds {
            max_mean_kld,
            min_same_top_percent,
            noise_mean_kld: noise_mean,
            noise_same_top_percent: noise_top,
            floor_mean_kld: FLOOR_MEAN_KLD,
            floor_same_top_percent: FLOOR_SAME_TOP,
            rule: format!(
                "mean KLD <= max({FLOOR_MEAN_KLD}, {NOISE_FACTOR} x CPU-vs-CPU mean KLD) and same top token >= min({FLOOR_SAME_TOP}%, 100% - 2 x the CPU-vs-CPU disagreement)"
            ),
        }
    }

    /// Why `d` is outside the limits, or `None` when it is within them.
    pub fn judge(&self, d: &Divergence) -> Option<String> {
        let mut why = Vec::new();
        if d.mean_kld > self.max_mean_kld {
            why.push(format!(
                "mean KLD {:.6} > {:.6}",
                d.mean_kld, self.max_mean_kld
            ));
        }
        if d.same_top_percent < self.min_same_top_percent {
            why.push(format!(
                "same top token {:.2}% < {:.2}%",
                d.same_top_percent, self.min_same_top_percent
            ));
        }
        (!why.is_empty()).then(|| why.join(", "))
    }

    pub fn describe(&self) -> String {
        format!(
            "mean KLD <= {:.6}, same top token >= {:.2}% (CPU-vs-CPU noise: mean KLD {}, same top {}; floors {} and {}%)",
            self.max_mean_kld,
            self.min_same_top_percent,
            self.noise_mean_kld
                .map(|v| format!("{v:.6}"))
                .unwrap_or_else(|| "not measured".into()),
            self.noise_same_top_percent
                .map(|v| format!("{v:.2}%"))
                .unwrap_or_else(|| "not measured".into()),
            self.floor_mean_kld,
            self.floor_same_top_percent
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(mean: f64, top: f64) -> Divergence {
        Divergence {
            mean_kld: mean,
            max_kld: mean * 10.0,
            kld_p999: None,
            same_top_percent: top,
        }
    }

    #[test]
    fn quiet_noise_keeps_the_floors() {
        let t = Thresholds::derive(&[d(0.0, 100.0), d(1e-6, 99.9)]);
        assert_eq!(t.max_mean_kld, FLOOR_MEAN_KLD);
        assert_eq!(t.min_same_top_percent, FLOOR_SAME_TOP);
        assert!(t.judge(&d(0.001, 99.0)).is_none());
        assert!(t.judge(&d(0.5, 99.0)).is_some());
        assert!(t.judge(&d(0.001, 60.0)).is_some());
    }

    #[test]
    fn loud_noise_widens_the_limits() {
        let t = Thresholds::derive(&[d(0.01, 96.0)]);
        assert!((t.max_mean_kld - 0.1).abs() < 1e-12);
        assert!((t.min_same_top_percent - 92.0).abs() < 1e-9);
        let none = Thresholds::derive(&[]);
        assert_eq!(none.noise_mean_kld, None);
        assert_eq!(none.max_mean_kld, FLOOR_MEAN_KLD);
    }
}
