// Cells in use and sequence ids, as RAII holds and leases: never lost on an error path, never counted twice.
#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "aoi/kv/cell_ledger.h"
#include "aoi/kv/seq_ids.h"

namespace aoi::kv {
namespace {

TEST(CellHold, FollowsItsHolderAndReleasesOnDestruction) {
  CellLedger ledger(4096);
  {
    CellHold a(ledger);
    a.set(100);
    CellHold b(ledger);
    b.add(50);
    b.add(-20);
    EXPECT_EQ(ledger.used(), 130);
    CellHold c = std::move(b);
    EXPECT_EQ(ledger.used(), 130);
    c = CellHold(ledger);  // the moved-to hold gives its cells back before taking the new (empty) one
    EXPECT_EQ(ledger.used(), 100);
    a.set(-5);  // never negative
    EXPECT_EQ(a.cells(), 0);
  }
  EXPECT_EQ(ledger.used(), 0);
}

TEST(SeqIdPool, LeasesComeBackAndAreNeverHandedOutTwice) {
  SeqIdPool pool(10, 3);
  std::set<engine::SeqId> ids;
  {
    auto a = pool.take();
    auto b = pool.take();
    auto c = pool.take();
    ASSERT_TRUE(a && b && c);
    EXPECT_FALSE(pool.take().has_value());
    EXPECT_EQ(pool.busy(), 3);
    ids = {a->id(), b->id(), c->id()};
    SeqLease moved = std::move(*b);
    EXPECT_FALSE(*b);
    EXPECT_EQ(pool.busy(), 3);
    swap(moved, *a);
    EXPECT_EQ(pool.busy(), 3);
  }
  EXPECT_EQ(ids, (std::set<engine::SeqId>{10, 11, 12}));
  // Always the lowest free id: busy ids stay packed.
  {
    auto a = pool.take();
    auto b = pool.take();
    EXPECT_EQ(a->id(), 10);
    EXPECT_EQ(b->id(), 11);
    a->release();
    EXPECT_EQ(pool.take()->id(), 10);
  }
  EXPECT_EQ(pool.busy(), 0);
  EXPECT_EQ(pool.free(), 3);
  auto again = pool.take();
  ASSERT_TRUE(again);
  again->release();
  EXPECT_EQ(pool.free(), 3);
}

}  // namespace
}  // namespace aoi::kv
