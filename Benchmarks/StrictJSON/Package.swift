// swift-tools-version:6.0
// The broker's hot decodes, JSONDecoder against the strict readers (StrictJSON), on bodies built here: a package
// of its own so that the main build does not carry it. Run: docs/benchmarks.md, "The strict readers".
import PackageDescription

let package = Package(
  name: "strict-json-bench",
  dependencies: [.package(name: "pagesync", path: "../..")],
  targets: [
    .executableTarget(
      name: "strict-json-bench",
      dependencies: [
        .product(name: "StrictJSON", package: "pagesync"), .product(name: "SyncModel", package: "pagesync"),
        .product(name: "SyncProtocol", package: "pagesync"),
      ])
  ],
  swiftLanguageModes: [.v6]
)
