#include "app/json.h"

#include <stdlib.h>

#include "snn_check.h"

static cJSON *must(cJSON *item)
{
    if (!item)
        snn_die("out of memory building JSON output");
    return item;
}

cJSON *snn_json_object(void) { return must(cJSON_CreateObject()); }

cJSON *snn_json_event(const char *event)
{
    cJSON *o = snn_json_object();
    snn_json_string(o, "event", event);
    return o;
}

void snn_json_add(cJSON *o, const char *key, cJSON *item)
{
    if (!cJSON_AddItemToObject(o, key, must(item)))
        snn_die("out of memory building JSON output");
}

void snn_json_number(cJSON *o, const char *key, double v) { snn_json_add(o, key, cJSON_CreateNumber(v)); }

/* cJSON prints a double with 15 digits where they read back exactly, else 17:
 * handing it the double nearest the float's shortest decimal keeps it short. */
snn_decimal snn_float_text(float v)
{
    snn_decimal d;
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(d.text, sizeof(d.text), "%.*g", digits, (double)v);
        if (strtof(d.text, NULL) == v)
            break;
    }
    return d;
}

static double shortest(float v) { return strtod(snn_float_text(v).text, NULL); }

void snn_json_float(cJSON *o, const char *key, float v) { snn_json_number(o, key, shortest(v)); }

void snn_json_string(cJSON *o, const char *key, const char *s)
{
    snn_json_add(o, key, s ? cJSON_CreateString(s) : cJSON_CreateNull());
}

cJSON *snn_json_array(void) { return must(cJSON_CreateArray()); }

void snn_json_push(cJSON *array, cJSON *item)
{
    if (!cJSON_AddItemToArray(array, must(item)))
        snn_die("out of memory building JSON output");
}

cJSON *snn_json_floats(const float *v, int n)
{
    cJSON *a = snn_json_array();
    for (int i = 0; i < n; i++)
        snn_json_push(a, cJSON_CreateNumber(shortest(v[i])));
    return a;
}

cJSON *snn_json_ints(const int *v, int n) { return must(cJSON_CreateIntArray(v, n)); }

void snn_json_put(FILE *f, cJSON *o)
{
    char *text = cJSON_PrintUnformatted(o);
    if (!text)
        snn_die("out of memory printing JSON output");
    fputs(text, f); /* a write error is the stream owner's to report (snn_out_commit) */
    fputc('\n', f);
    cJSON_free(text);
    cJSON_Delete(o);
}
