/* The program's JSON (--log lines, the dump's meta.json, evaluation
 * figures), built and printed by cJSON. Building an object cannot fail
 * quietly: an allocation that fails is one message and exit 1. */
#ifndef SNN_APP_JSON_H
#define SNN_APP_JSON_H

#include <cjson/cJSON.h>
#include <stdio.h>

cJSON *snn_json_object(void);
cJSON *snn_json_event(const char *event); /* {"event": event} */
void snn_json_number(cJSON *o, const char *key, double v);
/* A float printed as its shortest decimal that reads back to it (0.53, not 0.52999997138977051). */
void snn_json_float(cJSON *o, const char *key, float v);
void snn_json_string(cJSON *o, const char *key, const char *s); /* NULL: null */
void snn_json_add(cJSON *o, const char *key, cJSON *item);
cJSON *snn_json_array(void);
void snn_json_push(cJSON *array, cJSON *item);
cJSON *snn_json_floats(const float *v, int n); /* arrays, each element as snn_json_float */
cJSON *snn_json_ints(const int *v, int n);
/* v's shortest decimal that reads back to it. */
typedef struct {
    char text[32];
} snn_decimal;
snn_decimal snn_float_text(float v);
/* Prints o on one line and a newline, then deletes it. */
void snn_json_put(FILE *f, cJSON *o);

#endif
