#include "app/evaluate.h"

#include <math.h>

#include "app/json.h"
#include "snn_config.h"

int snn_predicted_class(const float *logits)
{
    int best = 0;
    for (int c = 1; c < SNN_CLASSES; c++)
        if (logits[c] > logits[best])
            best = c;
    return best;
}

void snn_class_probabilities(const float *logits, double *p)
{
    const double top = logits[snn_predicted_class(logits)];
    double total = 0.0;
    for (int c = 0; c < SNN_CLASSES; c++)
        total += p[c] = exp((double)logits[c] - top);
    for (int c = 0; c < SNN_CLASSES; c++)
        p[c] /= total;
}

void snn_report_evaluation(const float *logits, const uint8_t *labels, int n, snn_score score, int members,
                           FILE *out, FILE *log)
{
    int confusion[SNN_CLASSES][SNN_CLASSES] = {{0}}, total[SNN_CLASSES] = {0}, right = 0;
    for (int i = 0; i < n; i++) {
        int predicted = snn_predicted_class(logits + (size_t)i * SNN_CLASSES);
        confusion[labels[i]][predicted]++;
        total[labels[i]]++;
        right += predicted == labels[i];
    }
    float per_class[SNN_CLASSES];
    for (int c = 0; c < SNN_CLASSES; c++)
        per_class[c] = total[c] ? (float)confusion[c][c] / total[c] : 0.0f;

    fprintf(out, "test set: loss %.4f, accuracy %.2f%% (%d of %d)", score.loss, 100 * score.accuracy, right, n);
    if (members > 1)
        fprintf(out, ", the committee of %d", members);
    fprintf(out, "\n");
    fprintf(out, "\nconfusion matrix (rows: true class, columns: predicted)\n  true  accuracy |");
    for (int c = 0; c < SNN_CLASSES; c++)
        fprintf(out, " %5d", c);
    fprintf(out, "\n  ---------------+");
    for (int c = 0; c < SNN_CLASSES; c++)
        fprintf(out, "------");
    fprintf(out, "\n");
    for (int t = 0; t < SNN_CLASSES; t++) {
        fprintf(out, "  %4d   %6.2f%% |", t, 100 * per_class[t]);
        for (int c = 0; c < SNN_CLASSES; c++)
            fprintf(out, " %5d", confusion[t][c]);
        fprintf(out, "\n");
    }
    if (!log)
        return;
    cJSON *e = snn_json_event("evaluation");
    snn_json_string(e, "set", "test");
    snn_json_float(e, "loss", (float)score.loss);
    snn_json_float(e, "accuracy", (float)score.accuracy);
    snn_json_number(e, "samples", n);
    if (members > 1)
        snn_json_number(e, "members", members);
    snn_json_add(e, "per_class_accuracy", snn_json_floats(per_class, SNN_CLASSES));
    cJSON *rows = snn_json_array();
    for (int t = 0; t < SNN_CLASSES; t++)
        snn_json_push(rows, snn_json_ints(confusion[t], SNN_CLASSES));
    snn_json_add(e, "confusion", rows);
    snn_json_put(log, e);
}
