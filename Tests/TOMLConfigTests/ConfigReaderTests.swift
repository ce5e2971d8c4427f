import TOMLConfig
import Testing

@Suite struct ConfigReaderTests {
  static let text = """
    # a comment
    [server]
    listen = "127.0.0.1:7700"

    [limits]
    connections = 500
    flag = true

    [[auth.tokens]]
    token = "t1"
    user = "alice"
    workspaces = ["w1", "w2"]

    [[auth.tokens]]
    token = "t2"
    user = "bob"
    workspaces = "w3"
    """

  @Test func readsTypedValuesWithDefaults() throws {
    let document = try ConfigReader(text: ConfigReaderTests.text, file: "b.toml").document
    let server = try document.table("server")
    #expect(try server.string("listen", default: "x") == "127.0.0.1:7700")
    #expect(try server.string("missing", default: "fallback") == "fallback")
    let limits = try document.table("limits")
    #expect(try limits.int("connections", default: 1, range: 1...1000) == 500)
    #expect(try limits.bool("flag", default: false))
    let tokens = try document.table("auth").tables("tokens")
    #expect(tokens.count == 2)
    #expect(try tokens[0].stringArray("workspaces", default: []) == ["w1", "w2"])
  }

  @Test func errorsNameFileLineAndKey() throws {
    let document = try ConfigReader(text: ConfigReaderTests.text, file: "b.toml").document
    #expect(
      throws: ConfigError(
        file: "b.toml", line: 6, key: "limits.connections", message: "must be from 1 to 100 (got 500)")
    ) {
      try document.table("limits").int("connections", default: 1, range: 1...100)
    }
    #expect(throws: ConfigError(file: "b.toml", line: 3, key: "server.listen", message: "must be an integer"))
    {
      try document.table("server").int("listen", default: 1, range: 1...2)
    }
    let second = try document.table("auth").tables("tokens")[1]
    #expect(
      throws: ConfigError(
        file: "b.toml", line: 17, key: "auth.tokens[1].workspaces", message: "must be an array of strings")
    ) {
      try second.stringArray("workspaces", default: [])
    }
    #expect(
      ConfigError(file: "b.toml", line: 19, key: "auth.tokens[1].workspaces", message: "m").description
        == "b.toml:19: auth.tokens[1].workspaces: m")
  }

  @Test func unknownKeysAreErrorsWithTheirLine() throws {
    let document = try ConfigReader(text: ConfigReaderTests.text, file: "b.toml").document
    let limits = try document.table("limits")
    _ = try limits.int("connections", default: 1, range: 1...1000)
    #expect(throws: ConfigError(file: "b.toml", line: 7, key: "limits.flag", message: "unknown key")) {
      try limits.rejectUnknownKeys()
    }
    _ = try document.table("server")
    #expect(throws: ConfigError(file: "b.toml", line: 9, key: "auth", message: "unknown key")) {
      try document.rejectUnknownKeys()
    }
  }

  @Test func syntaxErrorsNameTheirLine() {
    do {
      _ = try ConfigReader(text: "[a]\nx = 1\ny = = 2\n", file: "bad.toml")
      Issue.record("parsed")
    } catch {
      #expect(error.file == "bad.toml")
      #expect(error.line == 3)
    }
  }

  /// Found by FuzzConfig: toml++ asserts that a header's key starts with a key character, so `[=]` aborted a
  /// debug build of either program (and is undefined behaviour in a release build) instead of being an error.
  @Test(arguments: [
    ("[=]", 1, "="), ("[.a]", 1, "."), ("[[[1]]]", 1, "["), ("[é]", 1, "é"), ("x = 1\r\n[ ,]", 2, ","),
    ("\u{FEFF}[#]", 1, "#"), ("[\u{FFFD}uth.tokens]]\ntoken = \"x\"", 1, "\u{FFFD}"),
    ("s = '''\n[x]\n'''\n[?]", 4, "?"), ("[[\na", 1, "\\n"), ("[ \r\n", 1, "\\r"),
  ])
  func aTableHeaderWhoseKeyStartsWithNoKeyCharacterIsAnErrorNamingItsLine(
    text: String, line: Int, character: String
  ) {
    do {
      _ = try ConfigReader(text: text, file: "c.toml")
      Issue.record("parsed")
    } catch {
      #expect(error.line == line)
      #expect(error.message.contains("invalid table header"))
      #expect(error.message.contains("'\(character)'"))
    }
  }

  /// Regression (FuzzConfig, in CI): a date, `T` and no digit, with a `:` after it, made toml++ assert in
  /// `parse_time`. Refused first, naming the line.
  @Test(arguments: [
    ("a = 1979-05-27t:\n", 1, "':'"), ("x = 1\na = 1979-05-27Tx:\n", 2, "'x'"),
    ("a = [1979-05-27t:]\n", 1, "':'"),
    ("t = { d = 1979-05-27T:00 }\n", 1, "':'"), ("a = 1979-05-27T", 1, "the end"),
    ("a = { blisten = [1, 2.5, 1979-05-27T\u{FFFD}\u{FFFD}07:32:00Z] }\n", 1, "'\u{FFFD}'"),
  ])
  func aDateWithoutItsTimeIsAnErrorNamingItsLine(text: String, line: Int, saw: String) {
    do {
      _ = try ConfigReader(text: text, file: "c.toml")
      Issue.record("parsed")
    } catch {
      #expect(error.line == line)
      #expect(error.message == "invalid date-time: a time must follow the T (saw \(saw))", "\(error.message)")
    }
  }

  @Test func datesTimesAndKeysThatLookLikeDatesStillParse() throws {
    let reader = try ConfigReader(
      text: """
        a = 1979-05-27T07:32:00Z
        b = 1979-05-27
        c = 1979-05-27 07:32:00
        d = [1979-05-27t07:32:00, 1979-05-27]
        s = "1979-05-27T:"
        [t]
        1979-05-27tab = 1
        """, file: "c.toml")
    _ = reader
  }

  @Test func bracketsInsideValuesAreNotTableHeaders() throws {
    let text = """
      a = [
        [+1],
        [{ b = 2 }],
      ]
      s = \"\"\"
      [=]
      \"\"\"
      t = '''
      [.x]
      '''
      [ok] # a comment [=]
      """
    let document = try ConfigReader(text: text, file: "c.toml").document
    #expect(try document.table("ok").path == "ok")
  }

  @Test func choicesAreChecked() throws {
    let document = try ConfigReader(text: "level = \"loud\"\n", file: "c.toml").document
    #expect(
      throws: ConfigError(
        file: "c.toml", line: 1, key: "level", message: #"must be one of "info", "debug" (got "loud")"#)
    ) {
      try document.choice("level", default: "info", from: ["info", "debug"])
    }
  }
}
