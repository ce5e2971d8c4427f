/// Everything `pagesyncd` reads from its TOML file.
public struct DaemonConfiguration: Sendable {
  public init() {}
}
