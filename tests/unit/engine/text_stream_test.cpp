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

// A model may emit bytes that are not UTF-8 (byte-fallback tokens): what is sent and kept is UTF-8, the bad
// bytes replaced by U+FFFD, and a character cut short by the end of the answer too.
TEST(TextStream, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  TextStream s({});
  EXPECT_EQ(s.push("a\xBA"
                   "b"),
            "a\xEF\xBF\xBD"
            "b");                               // a lone continuation byte
  EXPECT_EQ(s.push("\xE2\x82"), "");            // the start of a character: held back
  EXPECT_EQ(s.push("\xAC!"), "\xE2\x82\xAC!");  // completed: the euro sign
  EXPECT_EQ(s.push("\xC3"), "");
  EXPECT_EQ(s.push("x"), "\xEF\xBF\xBDx");  // never completed
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");  // cut by the end of the answer
  EXPECT_EQ(s.text(),
            "a\xEF\xBF\xBD"
            "b\xE2\x82\xAC!\xEF\xBF\xBDx\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TextStream, TextBeforeAStopStringIsRepairedToo) {
  TextStream s({"END"});
  s.push("\xFFok END");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), "\xEF\xBF\xBDok ");
}

}  // namespace
}  // namespace aoi::engine
