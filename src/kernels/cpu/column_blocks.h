// How the CPU's sums over leading axes cut a (rows, columns) tensor into work items: blocks of up to 256
// columns by 64 to 256 rows (about 8192 elements; each accumulator lane adds at most 256 values). A block's
// column sums accumulate row by row in the input's type; one column's blocks are then combined in f64 in row
// order. The cut depends on the shape alone, so the sums are the same for any number of threads, and a
// kernel that sums columns on the side (relu_bias_backward's bias gradient) gets sum's results to the bit.
// Internal to the library.
#pragma once

#include <algorithm>
#include <cstdint>

#include "src/kernels/cpu/parallel.h"

namespace nimbus::cpu {

struct ColumnBlocks {
  static constexpr int64_t kBlockElements = 8192;
  static constexpr int64_t kColumnsPerBlock = 256;
  static constexpr int64_t kMinRowsPerBlock = 64;
  static constexpr int64_t kMaxRowsPerBlock = 256;

  // One work item: rows [first_row, end_row) of columns [first_column, first_column + columns).
  struct Block {
    int64_t row_block, first_row, end_row, first_column, columns;
  };

  ColumnBlocks(int64_t rows, int64_t columns)
      : rows(rows),
        columns(columns),
        rows_per_block(
            std::clamp(kBlockElements / std::min(columns, kColumnsPerBlock), kMinRowsPerBlock, kMaxRowsPerBlock)),
        row_blocks((rows + rows_per_block - 1) / rows_per_block),
        column_blocks((columns + kColumnsPerBlock - 1) / kColumnsPerBlock) {}

  int64_t items() const { return row_blocks * column_blocks; }
  Block block(int64_t item) const {
    const int64_t row_block = item / column_blocks, first_column = item % column_blocks * kColumnsPerBlock;
    const int64_t first_row = row_block * rows_per_block;
    return {row_block, first_row, std::min(rows, first_row + rows_per_block), first_column,
            std::min(kColumnsPerBlock, columns - first_column)};
  }
  // Items per thread (parallel_for's grain) for at least `elements` elements per thread.
  int64_t grain(int64_t elements = kMemoryBoundGrain) const {
    return std::max<int64_t>(1, elements / (std::min(rows, rows_per_block) * std::min(columns, kColumnsPerBlock)));
  }

  int64_t rows, columns, rows_per_block, row_blocks, column_blocks;
};

}  // namespace nimbus::cpu
