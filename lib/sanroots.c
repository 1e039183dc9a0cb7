/* sanroots.c: LeakSanitizer's roots without the sanitizer runtimes' own
 * globals. Built into podfs, podfsd and podfs-replay only when they are
 * built with AddressSanitizer (lib/meson.build): never in a release.
 *
 * At exit LeakSanitizer looks for pointers to the heap in the writable
 * segments of every loaded module. Those of gcc's libasan and libubsan
 * are 12 MB of .bss, nearly all of it never touched: reading it maps a
 * zero page every 4 KiB, and took about 30 of the 45 ms of CPU that each
 * exit's leak check cost here (a run of the test suite starts about
 * 2,000 of these programs). The runtimes keep no pointer to the
 * program's heap (what they allocate comes from their own allocator,
 * outside it), so here LeakSanitizer scans no module's globals by default
 * (use_globals=0; an LSAN_OPTIONS that sets use_globals overrides it),
 * and just before its check the writable segments of every other module
 * loaded by then (the program, libc, OpenSSL, libfuse, ...) are
 * registered as root regions: it scans what it scanned before, less the
 * runtimes. The registering is an atexit handler installed after the
 * runtime's own (which is the leak check): it runs first. A leak is
 * found as before; a pointer kept only in a runtime's globals would now
 * show as a leak, never hide one. */
#include <link.h>
#include <sanitizer/lsan_interface.h>
#include <stdlib.h>
#include <string.h>

const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "use_globals=0";
}

static int add_module(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *name = info->dlpi_name ? info->dlpi_name : "";

	(void)size;
	(void)data;
	if (strstr(name, "/libasan.so") || strstr(name, "/libubsan.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W) && ph->p_memsz > 0)
			__lsan_register_root_region((const void *)(info->dlpi_addr + ph->p_vaddr),
						    ph->p_memsz);
	}
	return 0;
}

static void register_roots(void)
{
	dl_iterate_phdr(add_module, NULL);
}

__attribute__((constructor)) static void sanroots_init(void)
{
	atexit(register_roots);
}
