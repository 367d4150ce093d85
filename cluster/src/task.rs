//! A background task that ends with its owner.

use tokio::task::JoinHandle;

/// Aborts the task when dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(JoinHandle<()>);

impl AbortOnDrop {
    /// Spawns `task` on the current tokio runtime.
    pub(crate) fn spawn(task: impl Future<Output = ()> + Send + 'static) -> Self {
        AbortOnDrop(tokio::spawn(task))
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
