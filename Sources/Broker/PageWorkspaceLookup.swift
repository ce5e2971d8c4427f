import BrokerCore
import BrokerStore
import EventLoop
import SQLiteStore
import SyncModel

/// Which workspace each page of a `subscribe` frame is in, so that pages of other workspaces are denied.
///
/// A page never changes workspace, so the answer is remembered on the page's channel (`ChannelIndex`) for as long
/// as somebody subscribes to it, and learned again from commits (`FanOut.publish`). Only pages the index does not
/// know cost a store read, on the writer thread, one frame's at a time: while a read is under way, other frames
/// wait (`whenIdle`) undecoded, and then mostly find their pages known. When a thousand devices subscribe to the
/// same thousand pages at once, the store is read for the first frame only, and the frames that waited hold
/// their text (one allocation each) rather than a thousand decoded ids each.
///
/// Threading: the broker's loop thread.
final class PageWorkspaceLookup {
  /// Where the workspaces of a request's pages are.
  enum Answer {
    /// The index knows every page's workspace now: these are the pages' keys, in order, valid until the loop
    /// turn ends (`ChannelIndex.workspace(of:)`).
    case inIndex([PageKey])
    /// Read from the store: the workspace and time of each page, in the order asked; nil for a page that does
    /// not exist (yet).
    case read([PageFacts?])
  }

  private let loop: Loop
  private let writer: StoreWriter<any StoreConnection>
  private let storeBox: StoreBox
  /// The keys of the pages, if the channel index knows every one's workspace.
  private let knownKeys: ([EntityID]) -> [PageKey]?
  /// Whether a store read is under way; `lookUp` may be called only when it is not.
  private(set) var isReading = false
  private var idleWaiters: [() -> Void] = []
  /// Pages read from the store, for the metrics and tests.
  private(set) var pagesRead = 0

  init(
    loop: Loop, writer: StoreWriter<any StoreConnection>, storeBox: StoreBox,
    knownKeys: @escaping ([EntityID]) -> [PageKey]?
  ) {
    self.loop = loop
    self.writer = writer
    self.storeBox = storeBox
    self.knownKeys = knownKeys
  }

  /// Calls `completion` with where the workspaces of `pages` are: at once if the index knows them all, otherwise
  /// after a store read. No read may be under way (`isReading`; wait with `whenIdle`).
  func lookUp(_ pages: [EntityID], completion: @escaping (Result<Answer, any Error>) -> Void) {
    precondition(!isReading, "one store read at a time: wait with whenIdle")
    if let keys = knownKeys(pages) {
      completion(.success(.inIndex(keys)))
      return
    }
    isReading = true
    pagesRead += pages.count
    let box = storeBox
    let wanted = pages
    writer.read(
      on: loop, { _ in try box.store.workspacesAndTimes(of: wanted) },
      completion: { [weak self] result in
        guard let self else { return }
        self.isReading = false
        completion(result.map { .read($0) })
        self.runIdleWaiters()
      })
  }

  /// Runs `body` once no read is under way, after those that asked before it: at once if none is.
  func whenIdle(_ body: @escaping () -> Void) {
    idleWaiters.append(body)
    runIdleWaiters()
  }

  private func runIdleWaiters() {
    while !isReading && !idleWaiters.isEmpty {
      idleWaiters.removeFirst()()
    }
  }
}
