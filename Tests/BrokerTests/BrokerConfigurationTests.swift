import Broker
import EventLoop
import SyncModel
import TOMLConfig
import Testing

#if canImport(Glibc)
  import Glibc
#endif

private func sampleConfig(file: String = #filePath) -> String {
  let root = file.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/")
  let handle = fopen(root + "/config/pagesync-broker.toml", "r")!
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

@Suite struct BrokerConfigurationTests {
  @Test func theSampleFileDocumentsTheRealDefaults() throws {
    let sample = sampleConfig()
    #expect(try BrokerConfiguration.parse(sample, file: "sample") == BrokerConfiguration())
    // Uncomment every documented key (but the token and TLS examples, which have no default): the values written
    // there are the defaults.
    let uncommented = sample.split(separator: "\n", omittingEmptySubsequences: false).map {
      line -> Substring in
      let isKey = line.hasPrefix("# ") && line.dropFirst(2).first?.isLowercase == true && line.contains(" = ")
      let isTokenExample = [
        "# token", "# user", "# workspaces", "# algorithms", "# secret_file", "# public_key", "# jwks_file",
        "# issuer", "# audience", "# leeway_s", "# cert", "# key",
      ].contains { line.hasPrefix($0) }
      return isKey && !isTokenExample ? line.dropFirst(2) : line
    }.joined(separator: "\n")
    #expect(uncommented != sample)
    #expect(try BrokerConfiguration.parse(uncommented, file: "sample") == BrokerConfiguration())
  }

  @Test func tlsIsReadAndItsFilesChangeOnReloadWhileTurningItOnNeedsARestart() throws {
    let plain = try BrokerConfiguration.parse("[server]\nlisten = \"127.0.0.1:0\"\n", file: "t.toml")
    #expect(plain.tlsCertificateFile == nil && plain.tlsKeyFile == nil)
    let tls = try BrokerConfiguration.parse(
      "[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncert = \"a.pem\"\nkey = \"a.key\"\n", file: "t.toml")
    #expect(tls.tlsCertificateFile == "a.pem" && tls.tlsKeyFile == "a.key")
    let renamed = try BrokerConfiguration.parse(
      "[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncert = \"b.pem\"\nkey = \"b.key\"\n", file: "t.toml")
    let plan = tls.reloadPlan(to: renamed)
    #expect(plan.applied == ["server.tls.cert", "server.tls.key"] && plan.needsRestart.isEmpty)
    #expect(tls.reloaded(from: renamed).tlsCertificateFile == "b.pem")
    #expect(plain.reloadPlan(to: tls).needsRestart == ["server.tls"])
    #expect(plain.reloaded(from: tls).tlsCertificateFile == nil)
    #expect(tls.reloaded(from: plain).tlsCertificateFile == "a.pem")
    for (text, message) in [
      ("[server.tls]\nkey = \"a.key\"\n", "t.toml:1: server.tls.cert: is needed with key"),
      ("[server.tls]\ncert = \"\"\nkey = \"a.key\"\n", "t.toml:2: server.tls.cert: must not be empty"),
      ("[server.tls]\ncert = \"a\"\nkey = \"b\"\nca = \"c\"\n", "t.toml:4: server.tls.ca: unknown key"),
    ] {
      #expect(throws: (any Error).self) { try BrokerConfiguration.parse(text, file: "t.toml") }
      do {
        _ = try BrokerConfiguration.parse(text, file: "t.toml")
      } catch {
        #expect("\(error)".hasPrefix(message), "\(error)")
      }
    }
  }

  /// `[store] url` selects PostgreSQL; with `path` too it is an error naming both keys; it is shown without its
  /// password and needs a restart to change.
  @Test func aStoreURLSelectsPostgreSQLAndExcludesAPath() throws {
    let url = "postgres://pagesync:secret@db.internal:5432/pagesync"
    let configuration = try BrokerConfiguration.parse("[store]\nurl = \"\(url)\"\n", file: "t.toml")
    #expect(configuration.storeURL == url)
    #expect(BrokerConfiguration.withoutPassword(url) == "postgres://pagesync:***@db.internal:5432/pagesync")
    #expect(BrokerConfiguration().reloadPlan(to: configuration).needsRestart == ["store.url"])
    for (text, message) in [
      (
        "[store]\npath = \"a.sqlite\"\nurl = \"\(url)\"\n",
        "t.toml:3: store.url: and [store] path are both set"
      ),
      ("[store]\nurl = \"mysql://x\"\n", "t.toml:2: store.url: must be a PostgreSQL URL"),
    ] {
      do {
        _ = try BrokerConfiguration.parse(text, file: "t.toml")
        Issue.record("accepted: \(text)")
      } catch {
        #expect("\(error)".hasPrefix(message), "\(error)")
      }
    }
  }

  @Test func tokensAndLimitsAreRead() throws {
    let configuration = try BrokerConfiguration.parse(
      """
      [server]
      listen = "0.0.0.0:0"
      [[auth.tokens]]
      token = "0123456789abcdef-alice"
      user = "alice"
      workspaces = ["w1", "w2"]
      [store]
      readers = 0
      writer_cache_rows = 0
      checkpoint_pages = 250
      checkpointer = false
      [limits]
      batch_mutations = 10
      page_bytes = 1048576
      answer_bytes = 65536
      tree_depth = 50
      batch_work = 5000
      mutation_digests_per_client = 0
      """, file: "t.toml")
    #expect(configuration.listen == .inet(host: "0.0.0.0", port: 0))
    #expect(configuration.tokens.count == 1)
    #expect(
      configuration.tokens[0].workspaces == [try EntityID(validating: "w1"), try EntityID(validating: "w2")])
    #expect(configuration.limits.batchMutations == 10)
    #expect(configuration.limits.pageBytes == 1 << 20 && configuration.limits.answerBytes == 1 << 16)
    #expect(configuration.readers == 0)
    #expect(configuration.writerCacheRows == 0)
    #expect(configuration.checkpointPages == 250 && !configuration.checkpointer)
    let defaults = try BrokerConfiguration.parse("", file: "t.toml")
    #expect(defaults.checkpointPages == 1000 && defaults.checkpointer)
    #expect(configuration.limits.treeDepth == 50 && configuration.limits.batchWork == 5000)
    #expect(configuration.limits.mutationDigestsPerClient == 0)
    #expect(
      throws: ConfigError.self,
      "a negative count of digests is refused",
      performing: {
        try BrokerConfiguration.parse("[limits]\nmutation_digests_per_client = -1\n", file: "t.toml")
      })
  }

  @Test(arguments: [
    (
      "[server]\nlisten = \"nowhere\"\n",
      "t.toml:2: server.listen: expected HOST:PORT, [IPV6]:PORT or unix:PATH"
    ),
    (
      "[[auth.tokens]]\ntoken = \"short\"\nuser = \"a\"\n",
      "t.toml:2: auth.tokens[0].token: must be at least 16 characters"
    ),
    (
      "[[auth.tokens]]\ntoken = \"0123456789abcdef\"\nuser = \"not an id\"\n",
      "t.toml:3: auth.tokens[0].user: must be an id"
    ),
    ("[[auth.tokens]]\ntoken = \"0123456789abcdef\"\n", "t.toml:1: auth.tokens[0].user: is required"),
    (
      "[store]\nsynchronous = \"sometimes\"\n",
      "t.toml:2: store.synchronous: must be one of \"full\", \"normal\""
    ),
    ("[limits]\nframe_bytes = 10\n", "t.toml:2: limits.frame_bytes: must be from 1024"),
    ("[limits]\npage_bytes = 1000\n", "t.toml:2: limits.page_bytes: must be from 65536"),
    ("[store]\nreaders = 100\n", "t.toml:2: store.readers: must be from 0"),
    ("[store]\nwriter_cache_rows = -1\n", "t.toml:2: store.writer_cache_rows: must be from 0"),
    ("[store]\ncheckpoint_pages = 99\n", "t.toml:2: store.checkpoint_pages: must be from 100"),
    ("[store]\ncheckpointer = 1\n", "t.toml:2: store.checkpointer: must be"),
    (
      "[limits]\nqueued_bytes_per_connection = 1000\n",
      "t.toml:2: limits.queued_bytes_per_connection: must be from 65536"
    ),
    ("[limits]\nframe_seconds = 0\n", "t.toml:2: limits.frame_seconds: must be from 1 to 3600 (got 0)"),
    ("[limits]\nrequest_seconds = 3601\n", "t.toml:2: limits.request_seconds: must be from 1 to 3600"),
    ("[limits]\nwrite_stall_seconds = 0\n", "t.toml:2: limits.write_stall_seconds: must be from 1 to 3600"),
    ("[limits]\nconnections = \"many\"\n", "t.toml:2: limits.connections: must be an integer"),
    ("[limits]\ntree_depth = 1\n", "t.toml:2: limits.tree_depth: must be from 2"),
    ("[limits]\nbatch_work = 10\n", "t.toml:2: limits.batch_work: must be from 1000"),
    ("[logging]\nlevel = \"info\"\n", "t.toml:1: logging: unknown key"),
    ("[server]\nlisten = \"[::]:7700\"\n", "t.toml:2: server.listen: [::]:7700 is not a loopback address"),
    ("[server\n", "t.toml:1:"),
  ])
  func badFilesAreRefusedNamingLineAndKey(text: String, message: String) {
    do {
      _ = try BrokerConfiguration.parse(text, file: "t.toml")
      Issue.record("accepted: \(text)")
    } catch {
      #expect(error.description.hasPrefix(message), "\(error.description)")
    }
  }

  @Test func aReloadAppliesLiveKeysAndKeepsThoseThatNeedARestart() throws {
    let running = try BrokerConfiguration.parse(
      """
      [server]
      listen = "127.0.0.1:7700"
      [[auth.tokens]]
      token = "alice-token-0123456789"
      user = "alice"
      workspaces = ["w1", "w2"]
      """, file: "old")
    let file = try BrokerConfiguration.parse(
      """
      [server]
      listen = "127.0.0.1:7800"
      [store]
      path = "elsewhere.sqlite"
      log_retention = 10
      readers = 4
      [[auth.tokens]]
      token = "alice-token-0123456789"
      user = "alice"
      workspaces = ["w1"]
      [limits]
      connections = 5
      batch_mutations = 2
      page_bytes = 65536
      [log]
      level = "debug"
      [stream]
      ping_interval = 5
      """, file: "new")
    let plan = running.reloadPlan(to: file)
    #expect(plan.needsRestart == ["server.listen", "store.path", "store.readers"])
    #expect(
      plan.applied == [
        "store.log_retention", "auth.tokens", "limits.connections", "limits.batch_mutations",
        "limits.page_bytes",
        "log.level", "stream.ping_interval",
      ])
    #expect(plan.summary.hasSuffix("; restart needed for server.listen, store.path, store.readers"))
    let next = running.reloaded(from: file)
    #expect(next.listen == running.listen && next.storePath == running.storePath)
    #expect(next.readers == running.readers)
    #expect(next.tokens == file.tokens && next.limits == file.limits && next.logLevel == "debug")
    #expect(next.logRetention == 10 && next.pingIntervalSeconds == 5)
    #expect(
      running.reloadPlan(to: running).isEmpty && running.reloadPlan(to: running).summary == "nothing changed")
  }
}
