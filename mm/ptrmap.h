/* A map from addresses to records: open addressing, linear probing,
 * deletion by backward shift (no tombstones). Address 0 cannot be a key. */
#ifndef SNN_PTRMAP_H
#define SNN_PTRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uintptr_t *keys;
    void **values;
    size_t mask; /* capacity - 1; capacity is a power of two */
    size_t count;
} snn_ptrmap;

void snn_ptrmap_init(snn_ptrmap *m);
void snn_ptrmap_clear(snn_ptrmap *m);                           /* frees the table */
void snn_ptrmap_put(snn_ptrmap *m, uintptr_t key, void *value); /* key must be absent */
void *snn_ptrmap_take(snn_ptrmap *m, uintptr_t key);            /* removes it; NULL when absent */

#endif
