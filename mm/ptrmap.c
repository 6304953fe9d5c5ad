#include "mm/ptrmap.h"

#include <stdlib.h>

#include "snn_check.h"

#define INITIAL 64

static size_t slot_of(const snn_ptrmap *m, uintptr_t key)
{
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 32) & m->mask;
}

static void alloc_table(snn_ptrmap *m, size_t capacity)
{
    m->keys = calloc(capacity, sizeof(*m->keys));
    m->values = calloc(capacity, sizeof(*m->values));
    if (!m->keys || !m->values)
        snn_die("out of host memory for the pool's address table (%zu entries)", capacity);
    m->mask = capacity - 1;
    m->count = 0;
}

void snn_ptrmap_init(snn_ptrmap *m) { alloc_table(m, INITIAL); }

void snn_ptrmap_clear(snn_ptrmap *m)
{
    free(m->keys);
    free(m->values);
    m->keys = NULL;
    m->values = NULL;
    m->mask = m->count = 0;
}

static void insert(snn_ptrmap *m, uintptr_t key, void *value)
{
    size_t i = slot_of(m, key);
    while (m->keys[i])
        i = (i + 1) & m->mask;
    m->keys[i] = key;
    m->values[i] = value;
    m->count++;
}

void snn_ptrmap_put(snn_ptrmap *m, uintptr_t key, void *value)
{
    if (2 * (m->count + 1) > m->mask + 1) { /* keep the load under one half */
        snn_ptrmap old = *m;
        alloc_table(m, 2 * (old.mask + 1));
        for (size_t i = 0; i <= old.mask; i++)
            if (old.keys[i])
                insert(m, old.keys[i], old.values[i]);
        snn_ptrmap_clear(&old);
    }
    insert(m, key, value);
}

static size_t find(const snn_ptrmap *m, uintptr_t key)
{
    size_t i = slot_of(m, key);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & m->mask;
    return i;
}

void *snn_ptrmap_take(snn_ptrmap *m, uintptr_t key)
{
    size_t i = find(m, key);
    if (!m->keys[i])
        return NULL;
    void *value = m->values[i];
    /* Shift back every later entry of the run that may no longer be reached past the hole. */
    for (size_t j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
        size_t home = slot_of(m, m->keys[j]);
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->keys[i] = m->keys[j];
            m->values[i] = m->values[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->values[i] = NULL;
    m->count--;
    return value;
}
