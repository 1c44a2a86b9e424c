/* cli.h - tenantctl's verbs. Each verb is one file, src/cli/cmd_VERB.c, with
 * one entry point taking the arguments after the verb name (argv[0] is the
 * verb). Exit codes: 0 ok/allowed, 1 denied, 2 bad input or usage. */
#ifndef TENANTD_CLI_H
#define TENANTD_CLI_H

#define TD_EXIT_OK 0
#define TD_EXIT_DENIED 1
#define TD_EXIT_USAGE 2
#define TD_EXIT_UNAVAILABLE 3 /* could not reach tenantd */

int td_cmd_quantity(int argc, char **argv);
int td_cmd_admit(int argc, char **argv);
int td_cmd_provision(int argc, char **argv);
int td_cmd_apply(int argc, char **argv);
int td_cmd_get(int argc, char **argv);
int td_cmd_delete(int argc, char **argv);
int td_cmd_submit(int argc, char **argv);
int td_cmd_finish(int argc, char **argv);
int td_cmd_simulate(int argc, char **argv);
int td_cmd_loadtest(int argc, char **argv);

/* true if argv holds -h or --help. */
int td_cli_wants_help(int argc, char **argv);

#endif
