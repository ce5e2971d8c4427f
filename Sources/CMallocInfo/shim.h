#pragma once
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/mman.h>

#ifndef RTLD_DEFAULT
#define RTLD_DEFAULT ((void *)0)
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

/// Asks the kernel to reclaim the resident pages of this process's read-only file mappings (its own code and
/// constants, and the shared libraries'): `madvise(MADV_PAGEOUT)` on each private mapping of a file that is not
/// writable. The kernel skips every page that another process also maps, and a page reclaimed is read back from
/// the file when next touched: alone (`MADV_RANDOM` first: no read-ahead, so the fault-around finds no
/// neighbours to map with it), so what comes back is what runs. Returns how many mappings it advised, or -1 when
/// /proc/self/maps cannot be read. Linux 5.4 and later; on older kernels madvise refuses and nothing changes.
static inline int pagesync_page_out_file_mappings(void) {
  FILE *maps = fopen("/proc/self/maps", "re");
  if (maps == NULL) return -1;
  char line[4352];
  int advised = 0;
  while (fgets(line, sizeof line, maps) != NULL) {
    unsigned long start, end, offset, inode;
    unsigned int major, minor;
    char perms[5];
    if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu", &start, &end, perms, &offset, &major, &minor, &inode) != 7)
      continue;
    if (inode == 0 || perms[0] != 'r' || perms[1] == 'w' || perms[3] != 'p') continue;
    (void)madvise((void *)start, end - start, MADV_RANDOM);
    if (madvise((void *)start, end - start, MADV_PAGEOUT) == 0) advised += 1;
  }
  fclose(maps);
  return advised;
}

/// `malloc_trim(0)`: gives the heap's free pages back to the system. Does nothing in a program built with
/// AddressSanitizer or ThreadSanitizer (their runtimes define `__sanitizer_print_stack_trace`): their allocators
/// own the heap, glibc's arenas hold nothing to give back, and glibc's trim of them crashed in `mtrim` under
/// AddressSanitizer (an idle broker's give-back, in BrokerTests). Looked up at each call: a give-back is rare.
static inline int pagesync_malloc_trim(void) {
  if (dlsym(RTLD_DEFAULT, "__sanitizer_print_stack_trace") != NULL) return 0;
  return malloc_trim(0);
}
