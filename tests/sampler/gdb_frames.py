# gdb_frames.py - run by gdb (-x) attached to a process: every thread's
# frames as gdb's `bt` shows them, one line each, for test_names:
#   @thread <lwp>
#   @frame <level> <normal|inline|tailcall|other> <pc hex> <file or -> <line> <name or ??>
# The name is last (it may hold spaces); file is gdb's symtab file name.
import gdb

KINDS = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline", gdb.TAILCALL_FRAME: "tailcall"}

for thread in gdb.selected_inferior().threads():
    thread.switch()
    print("@thread %d" % thread.ptid[1])
    frame = gdb.newest_frame()
    level = 0
    while frame is not None:
        sal = frame.find_sal()
        filename = sal.symtab.filename if sal and sal.symtab else "-"
        print("@frame %d %s %x %s %d %s" % (level, KINDS.get(frame.type(), "other"), frame.pc(),
                                           filename, sal.line if sal else 0,
                                           frame.name() or "??"))
        level += 1
        try:
            frame = frame.older()
        except gdb.error:
            frame = None
