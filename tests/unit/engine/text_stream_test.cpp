#include <gtest/gtest.h>

#include "aoi/engine/generation.h"

namespace aoi::engine {
namespace {

TEST(TextStream, PassesTextThroughWithoutStops) {
  TextStream s({});
  EXPECT_EQ(s.push("Hello"), "Hello");
  EXPECT_EQ(s.push(", world"), ", world");
  EXPECT_EQ(s.flush(), "");
  EXPECT_EQ(s.text(), "Hello, world");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, StopStringSplitAcrossPieces) {
  TextStream s({"STOP"});
  EXPECT_EQ(s.push("abc S"), "abc ");  // "S" may start the stop string: held back
  EXPECT_EQ(s.push("TO"), "");
  EXPECT_EQ(s.push("Pxyz"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), "abc ");
}

TEST(TextStream, FalseStartIsReleased) {
  TextStream s({"STOP"});
  EXPECT_EQ(s.push("ST"), "");
  EXPECT_EQ(s.push("AR"), "STAR");
  EXPECT_EQ(s.flush(), "");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, EarliestOfSeveralStops) {
  TextStream s({"\n\n", "END"});
  s.push("one END two\n\nthree");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), "one ");
}

TEST(TextStream, HoldsBackIncompleteUtf8) {
  TextStream s({});
  const std::string euro = "\xE2\x82\xAC";  // U+20AC in three bytes
  EXPECT_EQ(s.push("a" + euro.substr(0, 1)), "a");
  EXPECT_EQ(s.push(euro.substr(1, 1)), "");
  EXPECT_EQ(s.push(euro.substr(2, 1) + "b"), euro + "b");
}

TEST(TextStream, FlushReleasesHeldText) {
  TextStream s({"STOP"});
  EXPECT_EQ(s.push("xS"), "x");
  EXPECT_EQ(s.flush(), "S");
  EXPECT_EQ(s.text(), "xS");
}

}  // namespace
}  // namespace aoi::engine
