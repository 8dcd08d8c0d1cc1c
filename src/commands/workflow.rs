// Temporary: replaced by the real command while it is being written.
pub fn run(_a: &crate::cli::WorkflowArgs) -> anyhow::Result<i32> {
    anyhow::bail!("under construction")
}
