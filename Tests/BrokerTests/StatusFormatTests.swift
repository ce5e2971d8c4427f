import Testing

@testable import Broker

/// How the status page writes numbers, and its HTML escaping.
@Suite struct StatusFormatTests {
  @Test func countsAreGroupedByThousands() {
    #expect(StatusFormat.count(0) == "0")
    #expect(StatusFormat.count(999) == "999")
    #expect(StatusFormat.count(1000) == "1,000")
    #expect(StatusFormat.count(1_234_567) == "1,234,567")
    #expect(StatusFormat.count(-12_345) == "-12,345")
  }

  @Test func ratesBytesAndDurations() {
    #expect(StatusFormat.perSecond(0) == "0.0/s")
    #expect(StatusFormat.perSecond(12.46) == "12.5/s")
    #expect(StatusFormat.perSecond(4321.4) == "4,321/s")
    #expect(StatusFormat.bytes(812) == "812 B")
    #expect(StatusFormat.bytes(4096) == "4.0 KiB")
    #expect(StatusFormat.bytes(16 << 20) == "16.0 MiB")
    #expect(StatusFormat.bytes(3 << 30 + 1 << 29) == "3.5 GiB")
    #expect(StatusFormat.duration(.microseconds(250)) == "250 µs")
    #expect(StatusFormat.duration(.microseconds(12_450)) == "12.5 ms")
    #expect(StatusFormat.duration(.milliseconds(2500)) == "2.5 s")
  }

  @Test func uptimeInItsTwoLargestUnits() {
    #expect(StatusFormat.uptime(milliseconds: 42_900) == "42 s")
    #expect(StatusFormat.uptime(milliseconds: 303_000) == "5 min 3 s")
    #expect(StatusFormat.uptime(milliseconds: (3 * 3600 + 12 * 60 + 5) * 1000) == "3 h 12 min")
    #expect(StatusFormat.uptime(milliseconds: (4 * 86_400 + 2 * 3600 + 59) * 1000) == "4 d 2 h")
  }

  @Test func utcDates() {
    #expect(StatusFormat.utc(secondsSince1970: 0) == "1970-01-01 00:00:00 UTC")
    #expect(StatusFormat.utc(secondsSince1970: 1_738_314_000.9) == "2025-01-31 09:00:00 UTC")
    #expect(StatusFormat.utc(secondsSince1970: 951_825_599) == "2000-02-29 11:59:59 UTC")
    #expect(StatusFormat.utc(secondsSince1970: 4_107_542_400) == "2100-03-01 00:00:00 UTC")
    #expect(StatusFormat.utc(secondsSince1970: -1) == "1969-12-31 23:59:59 UTC")
  }

  @Test func everyCharacterThatEndsTextOrAnAttributeIsEscaped() {
    #expect(HTMLWriter.escape("plain é ✓") == "plain é ✓")
    #expect(
      HTMLWriter.escape(#"<script>alert("x" & 'y')</script>"#)
        == "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;")
    var page = HTMLWriter()
    page.open("td", [("data-key", #"a" onmouseover="x"#)])
    page.text("<b>")
    page.close("td")
    #expect(page.html == #"<td data-key="a&quot; onmouseover=&quot;x">&lt;b&gt;</td>"#)
  }
}
