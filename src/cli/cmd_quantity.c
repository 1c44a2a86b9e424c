/* cmd_quantity.c - `tenantctl quantity Q...`: prints the canonical
 * Kubernetes form of each quantity, one per line, as Quantity.String()
 * would. A way to check a quota file's numbers before applying it. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/quantity.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tenantctl quantity QUANTITY...\n\n"
               "Prints the canonical Kubernetes form of each QUANTITY, one per line\n"
               "(1024Mi -> 1Gi, 0.5 -> 500m, 1.5Gi -> 1536Mi). Exit status 2 if any\n"
               "QUANTITY is not valid; the valid ones are still printed.\n");
}

int td_cmd_quantity(int argc, char **argv)
{
    if (td_cli_wants_help(argc, argv)) {
        usage(stdout);
        return TD_EXIT_OK;
    }
    int first = 1;
    /* "--" ends options; quantities such as "-1" are never flags anyway. */
    if (first < argc && strcmp(argv[first], "--") == 0)
        first++;
    if (first >= argc) {
        usage(stderr);
        return TD_EXIT_USAGE;
    }
    int status = TD_EXIT_OK;
    for (int i = first; i < argc; i++) {
        td_quantity q;
        td_err err;
        if (td_quantity_parse(argv[i], &q, &err) != TD_OK) {
            fprintf(stderr, "tenantctl quantity: %s\n", err.msg);
            status = TD_EXIT_USAGE;
            continue;
        }
        char buf[TD_QUANTITY_STR_MAX];
        td_quantity_format(&q, buf, sizeof buf);
        printf("%s\n", buf);
    }
    return status;
}
