/* The numeric open-coded iterator, for headers older than Linux 6.4 / libbpf 1.2 (Debian 12
 * ships both): the UAPI struct, the three kfuncs, and bpf_for() built the way libbpf's
 * bpf_helpers.h builds it (the iterator destroyed by a cleanup attribute, the loop variable
 * re-checked against the bounds so that the verifier knows its range). */
#ifndef ITER_NUM_H
#define ITER_NUM_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __weak __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __weak __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __weak __ksym;

#ifndef bpf_for
#define bpf_for(i, start, end)                                                          \
	for (struct bpf_iter_num __iter                                                 \
		     __attribute__((aligned(8), cleanup(bpf_iter_num_destroy))),        \
	     *__once __attribute__((unused)) =                                          \
		     (bpf_iter_num_new(&__iter, (start), (end)),                        \
		      /* names destroy outside the cleanup too, so that clang emits   */ \
		      /* its BTF                                                      */ \
		      (void)bpf_iter_num_destroy, (void *)0);                           \
	     ({                                                                         \
		     int *__cur = bpf_iter_num_next(&__iter);                           \
		     __cur && ((i) = *__cur, (i) >= (start) && (i) < (end));            \
	     });)
#endif

#endif
