import Daemon
import SyncModel
import TOMLConfig
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// config/pagesyncd.toml, as shipped.
private func sampleConfig(file: String = #filePath) throws -> String {
  let root = file.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/")
  return readText(root + "/config/pagesyncd.toml")
}

private func readText(_ path: String) -> String {
  guard let handle = fopen(path, "r") else { return "" }
  defer { fclose(handle) }
  var bytes: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 4096)
  while true {
    let count = fread(&chunk, 1, chunk.count, handle)
    bytes += chunk[0..<count]
    if count < chunk.count { break }
  }
  return String(decoding: bytes, as: UTF8.self)
}

@Suite struct DaemonConfigurationTests {
  @Test func theSampleFileDocumentsTheRealDefaults() throws {
    let sample = try sampleConfig()
    #expect(!sample.isEmpty)
    #expect(try DaemonConfiguration.parse(sample, file: "sample") == DaemonConfiguration())
    // Uncomment every documented key (but ca_file's example, which has no default): the values written there
    // must be the defaults.
    let uncommented = sample.split(separator: "\n", omittingEmptySubsequences: false).map {
      line -> Substring in
      let isKey =
        line.hasPrefix("# ") && line.dropFirst(2).first?.isLowercase == true && line.contains(" = ")
        && !line.hasPrefix("# ca_file")
      return isKey ? line.dropFirst(2) : line
    }.joined(separator: "\n")
    #expect(uncommented.count < sample.count - 30)
    #expect(try DaemonConfiguration.parse(uncommented, file: "sample") == DaemonConfiguration())
  }

  @Test func everyKeyIsRead() throws {
    let configuration = try DaemonConfiguration.parse(
      """
      [broker]
      url = "http://broker.example:8080/base"
      token = "0123456789abcdef"
      workspace = "team"
      [store]
      path = "/var/lib/pagesyncd/store.sqlite"
      cache_kib = 256
      [api]
      socket = "/run/pagesyncd/api.sock"
      socket_mode = "0660"
      [offline]
      database_row_limit = 5
      recent_limit = 0
      [sync]
      backoff_base_ms = 100
      backoff_cap_ms = 1000
      backoff_reset_ms = 0
      heartbeat_interval = 5
      fetch_batch = 10
      push_batch = 20
      request_timeout = 7
      clock_ahead_seconds = 600
      [log]
      level = "debug"
      """, file: "t.toml")
    #expect(configuration.brokerURL.description == "http://broker.example:8080/base")
    #expect(configuration.token == "0123456789abcdef")
    #expect(configuration.workspace == (try EntityID(validating: "team")))
    #expect(configuration.storePath == "/var/lib/pagesyncd/store.sqlite")
    #expect(configuration.storeCacheKiB == 256 && DaemonConfiguration().storeCacheKiB == 512)
    #expect(configuration.socketPath == "/run/pagesyncd/api.sock")
    #expect(configuration.socketMode == 0o660)
    #expect(configuration.databaseRowLimit == 5 && configuration.recentLimit == 0)
    #expect(configuration.backoff.base == 100 && configuration.backoff.cap == 1000)
    #expect(configuration.backoff.resetAfter == 0)
    #expect(configuration.heartbeatSeconds == 5 && configuration.fetchBatch == 10)
    #expect(configuration.pushBatch == 20 && configuration.requestTimeoutSeconds == 7)
    #expect(configuration.clockAheadSeconds == 600 && configuration.clockBound.aheadMillis == 600_000)
    #expect(configuration.logLevel == "debug")
  }

  @Test(arguments: [
    ("[broker]\nurl = \"ftp://b.example\"\n", "t.toml:2: broker.url: scheme ftp is not supported"),
    ("[broker]\nurl = \"ws://b.example\"\n", "t.toml:2: broker.url: must be an http:// or https:// URL"),
    (
      "[broker]\nurl = \"http://b.example\"\nca_file = \"ca.pem\"\n",
      "t.toml:3: broker.ca_file: needs an https:// url"
    ),
    ("[broker]\nurl = \"nowhere\"\n", "t.toml:2: broker.url: "),
    ("[broker]\nworkspace = \"not an id\"\n", "t.toml:2: broker.workspace: must be an id"),
    ("[broker]\ntoken = \"a b\"\n", "t.toml:2: broker.token: must not contain spaces"),
    ("[store]\npath = \"\"\n", "t.toml:2: store.path: must not be empty"),
    ("[store]\ncache_kib = 10\n", "t.toml:2: store.cache_kib: must be from 64 to 1048576"),
    ("[api]\nsocket_mode = \"rw\"\n", "t.toml:2: api.socket_mode: must be an octal mode"),
    ("[api]\nsocket_mode = \"0999\"\n", "t.toml:2: api.socket_mode: must be an octal mode"),
    ("[offline]\ndatabase_row_limit = -1\n", "t.toml:2: offline.database_row_limit: must be from 0"),
    (
      "[sync]\nbackoff_base_ms = 500\nbackoff_cap_ms = 100\n",
      "t.toml:3: sync.backoff_cap_ms: must not be below backoff_base_ms"
    ),
    ("[sync]\nheartbeat_interval = 0\n", "t.toml:2: sync.heartbeat_interval: must be from 1"),
    ("[sync]\nfetch_batch = 5000\n", "t.toml:2: sync.fetch_batch: must be from 1 to 1000"),
    ("[sync]\npoll = true\n", "t.toml:2: sync.poll: unknown key"),
    ("[sync]\nclock_ahead_seconds = 0\n", "t.toml:2: sync.clock_ahead_seconds: must be from 1 to 315360000"),
    ("[log]\nlevel = \"loud\"\n", "t.toml:2: log.level: must be one of"),
    (
      "[broker]\ntoken = \"t\"\ntoken_file = \"/f\"\n",
      "t.toml:3: broker.token_file: set only one of token, token_file and token_command (this file sets token, token_file)"
    ),
    (
      "[broker]\ntoken_file = \"/f\"\ntoken_command = [\"x\"]\n",
      "t.toml:3: broker.token_command: set only one of token, token_file and token_command"
    ),
    ("[broker]\ntoken_command = []\n", "t.toml:2: broker.token_command: must name a program"),
    ("[broker]\ntoken_command = \"x --y\"\n", "t.toml:2: broker.token_command: must be an array of strings"),
    ("[broker]\ntoken_file = \"\"\n", "t.toml:2: broker.token_file: must not be empty"),
    (
      "[broker]\ntoken_command_timeout = 0\n", "t.toml:2: broker.token_command_timeout: must be from 1 to 600"
    ),
    ("[broker]\ntoken_max_bytes = 10\n", "t.toml:2: broker.token_max_bytes: must be from 64"),
    (
      "[broker]\ntoken = \"caf\u{e9}\"\n",
      "t.toml:2: broker.token: is not a usable bearer token: the token holds a byte"
    ),
    (
      "[broker]\ntoken = \"\(String(repeating: "x", count: 65))\"\ntoken_max_bytes = 64\n",
      "t.toml:2: broker.token: is not a usable bearer token: the token is longer than [broker] token_max_bytes (64)"
    ),
    ("[daemon]\nx = 1\n", "t.toml:1: daemon: unknown key"),
    ("[broker]\nurl = []\n", "t.toml:2: broker.url: must list at least one broker URL"),
    ("[broker]\nurl = 7700\n", "t.toml:2: broker.url: must be a string or an array of strings"),
    ("[broker]\nurl = [\"http://a\", 1]\n", "t.toml:2: broker.url: must be a string or an array of strings"),
    (
      "[broker]\nurl = [\"http://a\", \"ws://b\"]\n",
      "t.toml:2: broker.url: url[1] must be an http:// or https:// URL"
    ),
    ("[broker]\nurl = [\"http://a\", \"nowhere\"]\n", "t.toml:2: broker.url: url[1]: "),
    ("[broker]\nurl = [\"http://a\", \"http://a\"]\n", "t.toml:2: broker.url: url[1] repeats url[0]"),
    (
      "[broker]\nurl = [\(Array(repeating: "\"http://a\"", count: 17).joined(separator: ", "))]\n",
      "t.toml:2: broker.url: must list at most 16 broker URLs (this file lists 17)"
    ),
    (
      "[broker]\nurl = [\"http://a\", \"http://b\"]\nca_file = \"ca.pem\"\n",
      "t.toml:3: broker.ca_file: needs an https:// url"
    ),
  ])
  func badValuesNameTheKey(text: String, expected: String) {
    #expect {
      _ = try DaemonConfiguration.parse(text, file: "t.toml")
    } throws: { error in
      "\(error)".hasPrefix(expected)
    }
  }

  @Test func anHTTPSBrokerWithAPrivateCAIsRead() throws {
    let configuration = try DaemonConfiguration.parse(
      "[broker]\nurl = \"https://b.example\"\nca_file = \"/etc/ca.pem\"\n", file: "t.toml")
    #expect(configuration.brokerURL.isSecure && configuration.brokerURL.port == 443)
    #expect(configuration.caFile == "/etc/ca.pem")
    let next = try DaemonConfiguration.parse("[broker]\nurl = \"https://b.example\"\n", file: "t.toml")
    #expect(configuration.reloadPlan(to: next).needsRestart == ["broker.ca_file"])
    #expect(configuration.reloaded(from: next).caFile == "/etc/ca.pem")
  }

  @Test func aListOfBrokerURLsIsReadInOrderAndChangingItNeedsARestart() throws {
    let configuration = try DaemonConfiguration.parse(
      "[broker]\nurl = [\"https://b1.example\", \"http://b2.example:7700/sync\"]\nca_file = \"/etc/ca.pem\"\n",
      file: "t.toml")
    #expect(
      configuration.brokerURLs.map(\.description) == [
        "https://b1.example:443", "http://b2.example:7700/sync",
      ])
    #expect(configuration.brokerURL.description == "https://b1.example:443")
    let one = try DaemonConfiguration.parse("[broker]\nurl = [\"http://b1.example\"]\n", file: "t.toml")
    #expect(one.brokerURLs.map(\.description) == ["http://b1.example:80"])
    let reordered = try DaemonConfiguration.parse(
      "[broker]\nurl = [\"http://b2.example:7700/sync\", \"https://b1.example\"]\nca_file = \"/etc/ca.pem\"\n",
      file: "t.toml")
    #expect(configuration.reloadPlan(to: reordered).needsRestart == ["broker.url"])
    #expect(configuration.reloaded(from: reordered).brokerURLs == configuration.brokerURLs)
  }

  @Test func theTokenSourceIsTheOneKeySet() throws {
    #expect(DaemonConfiguration().tokenSource == .fixed(""))
    let file = try DaemonConfiguration.parse(
      "[broker]\ntoken_file = \"/run/t\"\ntoken_max_bytes = 4096\n", file: "t.toml")
    #expect(file.tokenSource == .file && file.tokenFile == "/run/t" && file.tokenMaxBytes == 4096)
    let command = try DaemonConfiguration.parse(
      "[broker]\ntoken_command = [\"/bin/app\", \"print token\"]\ntoken_command_timeout = 3\n", file: "t.toml"
    )
    #expect(command.tokenSource == .command && command.tokenCommand == ["/bin/app", "print token"])
    #expect(command.tokenCommandTimeoutSeconds == 3)
    #expect(
      DaemonConfiguration().reloadPlan(to: command).applied == [
        "broker.token_command", "broker.token_command_timeout",
      ])
  }

  @Test func anUnreadableFileIsNamed() {
    #expect {
      _ = try DaemonMain.loadConfiguration(path: "/nonexistent/pagesyncd.toml")
    } throws: { error in
      "\(error)".hasPrefix("/nonexistent/pagesyncd.toml: cannot read the file")
    }
  }

  @Test func aReloadAppliesLiveKeysAndKeepsThoseThatNeedARestart() throws {
    let running = DaemonConfiguration()
    let file = try DaemonConfiguration.parse(
      """
      [broker]
      url = "http://127.0.0.1:9999"
      token = "a-new-token-0123456789"
      [store]
      cache_kib = 128
      [api]
      socket = "elsewhere.sock"
      socket_mode = "0660"
      [offline]
      recent_limit = 3
      [sync]
      backoff_base_ms = 100
      heartbeat_interval = 5
      clock_ahead_seconds = 3600
      [log]
      level = "debug"
      """, file: "new")
    let plan = running.reloadPlan(to: file)
    #expect(plan.needsRestart == ["broker.url", "store.cache_kib", "api.socket", "api.socket_mode"])
    #expect(
      plan.applied == [
        "broker.token", "offline.recent_limit", "sync.backoff_base_ms", "sync.heartbeat_interval",
        "sync.clock_ahead_seconds", "log.level",
      ])
    let next = running.reloaded(from: file)
    #expect(next.brokerURL == running.brokerURL && next.socketPath == running.socketPath)
    #expect(next.socketMode == running.socketMode && next.storePath == running.storePath)
    #expect(next.storeCacheKiB == running.storeCacheKiB)
    #expect(next.token == file.token && next.recentLimit == 3 && next.backoffBase == 100)
    #expect(next.heartbeatSeconds == 5 && next.logLevel == "debug")
  }
}
