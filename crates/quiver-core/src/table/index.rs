//! A table's persistent index (see `crate::index`): found as the settings say, it drops
//! files before their footers are read, and answers a count or a min/max on its own.

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::physical_optimizer::pruning::PruningPredicate;

use super::{QuiverTable, TableOptions};
use crate::index::FileIndex;
use crate::options::IndexSetting;
use crate::runtime::QuiverRuntime;

impl QuiverTable {
    /// The index `options` ask for: none for a single file, an error if an index named
    /// by URI cannot be read.
    pub(super) async fn find_index(
        &self,
        runtime: &QuiverRuntime,
        options: &TableOptions,
    ) -> Result<Option<Arc<FileIndex>>> {
        if self.listing.files.len() < 2 {
            return Ok(None);
        }
        let meta = match &options.index {
            IndexSetting::Off => return Ok(None),
            IndexSetting::Auto => match &self.listing.index {
                Some(meta) => meta.clone(),
                None => return Ok(None),
            },
            IndexSetting::At(uri) => runtime.source_for(uri)?.head(uri).await?,
        };
        Ok(Some(Arc::new(FileIndex::read(runtime, &meta).await?)))
    }

    /// The table's row count, if its index describes every file as listed.
    pub fn rows_from_index(&self) -> Option<i64> {
        self.index.as_ref()?.total_rows(&self.files())
    }

    /// The min and max of a file column from the index (see `FileIndex::min_max`).
    pub fn min_max_from_index(&self, column: &str) -> Option<(ScalarValue, ScalarValue)> {
        if self.is_listing_column(column) {
            return None;
        }
        self.index.as_ref()?.min_max(&self.files(), column)
    }

    /// The kept files that the index does not rule out, and how many it did.
    pub(super) fn index_kept(
        &self,
        kept: Vec<usize>,
        predicate: Option<&PruningPredicate>,
    ) -> (Vec<usize>, usize) {
        let (Some(index), Some(predicate)) = (&self.index, predicate) else {
            return (kept, 0);
        };
        let files: Vec<_> = kept
            .iter()
            .map(|&i| self.listing.files[i].meta.clone())
            .collect();
        let keep = index.files_to_read(predicate, &files, &self.file_schema());
        let before = kept.len();
        let kept: Vec<usize> = kept
            .into_iter()
            .zip(keep)
            .filter_map(|(i, keep)| keep.then_some(i))
            .collect();
        let pruned = before - kept.len();
        (kept, pruned)
    }
}
