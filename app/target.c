#include "app/target.h"

#include "app/json.h"

void snn_target_init(snn_target *t, double goal, snn_set set, int goes_on)
{
    *t = (snn_target){.goal = goal, .set = set, .goes_on = goes_on, .best = {.score = {.accuracy = -1}}};
}

static void add_mark(cJSON *e, const snn_target_mark *m)
{
    snn_json_number(e, "epoch", m->epoch);
    snn_json_number(e, "step", m->step);
    snn_json_number(e, "steps", (double)m->steps);
    snn_json_float(e, "loss", (float)m->score.loss);
    snn_json_float(e, "acc", (float)m->score.accuracy);
    snn_json_float(e, "train_s", (float)m->train_s);
    snn_json_float(e, "wall_s", (float)m->wall_s);
}

static void log_target(const snn_target *t, FILE *log)
{
    cJSON *e = snn_json_event("target");
    snn_json_string(e, "set", snn_set_name(t->set));
    snn_json_float(e, "target_acc", (float)t->goal);
    snn_json_add(e, "reached", cJSON_CreateBool(t->reached));
    snn_json_add(e, "keep_going", cJSON_CreateBool(t->goes_on));
    add_mark(e, t->reached ? &t->hit : &t->best);
    snn_json_put(log, e);
}

void snn_target_score(snn_target *t, snn_score s, int epoch, int step, long steps, double train_s,
                      double wall_s, FILE *log)
{
    const snn_target_mark m = {s, epoch, step, steps, train_s, wall_s};
    if (log) {
        cJSON *e = snn_json_event("target_score");
        snn_json_string(e, "set", snn_set_name(t->set));
        add_mark(e, &m);
        snn_json_put(log, e);
    }
    if (s.accuracy > t->best.score.accuracy)
        t->best = m;
    if (t->reached || s.accuracy < t->goal)
        return;
    t->reached = 1;
    t->hit = m;
    printf("target: %.2f%% %s accuracy reached (%.2f%%) at epoch %d step %d, %ld steps: %.4f s of training, "
           "%.3f s wall\n",
           100 * t->goal, snn_set_name(t->set), 100 * s.accuracy, epoch, step, steps, train_s, wall_s);
    fflush(stdout);
    if (log)
        log_target(t, log);
}

void snn_target_missed(const snn_target *t, FILE *log)
{
    const snn_target_mark *b = &t->best;
    printf("target: %.2f%% %s accuracy not reached; the best was %.2f%% at epoch %d step %d (%.4f s of "
           "training)\n",
           100 * t->goal, snn_set_name(t->set), 100 * b->score.accuracy, b->epoch, b->step, b->train_s);
    if (log)
        log_target(t, log);
}
