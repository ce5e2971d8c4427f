import CMallocInfo

/// Giving memory back once a burst is over. A first sync of 10,000 pages leaves glibc holding about 6 MB of
/// freed heap and SQLite a full page cache, in a daemon that then sits idle for hours: `scripts/idle-daemon.py`
/// measured 33.9 MB resident, 27.4 MB after `malloc_trim`. And most of what stays resident is code: the pages of
/// the program and its libraries that the burst ran, plus the kernel's fault-around (up to 64 KB around each page
/// touched): 10 MB of the program's own text, of which the idle loop needs a fraction. Loop thread only.
extension SyncDriver {
  /// Work that may have freed much memory just ended (a fetch round); once nothing else came for
  /// `memoryReturnDelayMillis`, SQLite's unused cache pages and the heap's free pages go back to the system.
  /// Each call moves the deadline: a sync of many rounds trims once, after the last.
  ///
  /// A long burst (a first sync of 10,000 pages is a hundred rounds) also gives back, at most every
  /// `burstPageOutIntervalMillis`, the heap's free pages and the code it ran: the peak of a first sync was mostly
  /// code touched once (startup, the catch-up, each step of the walk: 11 MB of the program's own text resident at
  /// the peak, against 2–5 MB that an idle loop keeps) and the kernel's fault-around beside it. What the rounds
  /// still run comes back at once, from the page cache.
  func memoryMayBeReturned() {
    returnMemoryOnceQuiet()
    if loop.now &- lastCodePageOutMillis >= burstPageOutIntervalMillis {
      _ = pagesync_malloc_trim()
      pageOutCode()
    }
  }

  /// Gives the memory back `memoryReturnDelayMillis` from now, unless more work comes first (it moves the deadline).
  func returnMemoryOnceQuiet() {
    memoryTimer.start(after: memoryReturnDelayMillis) { [unowned self] in
      returnMemory()
    }
  }

  /// Gives back what can be given back now: SQLite's cache pages not in use, then the heap's free pages (also
  /// those below the top of the heap, which glibc keeps otherwise), then the resident pages of the code and
  /// constants mapped from files (`MADV_PAGEOUT`; pages another process maps too are left alone). The next burst
  /// reads back only the code it runs, a page at a time, rather than the fault-around's neighbours.
  func returnMemory() {
    store.releaseMemory()
    _ = pagesync_malloc_trim()
    pageOutCode()
    memoryReturns += 1
  }

  /// Asks the kernel to page out the resident pages of the read-only file mappings (`MADV_PAGEOUT`).
  func pageOutCode() {
    pagedOutMappings = Int(pagesync_page_out_file_mappings())
    lastCodePageOutMillis = loop.now
    codePageOuts += 1
  }
}
