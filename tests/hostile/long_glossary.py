"""HOSTILE: an honest memory whose declarations overflow the task model. Its ALWAYS_ON_KNOWLEDGE is a long
glossary (26,000 characters, within the contract's 32,000 for one prompt, as an LLM-written program may well
carry), which goes into every answer prompt: a model with a small context refuses each one (HTTP 400). That
refusal is the program's doing, not the endpoint's failure: before, it stopped the run (exit 3)."""

from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text's main statement."
INSTRUCTION_QUERY = "Rewrite the question as keywords."
INSTRUCTION_RESPONSE = "Answer in a few words from the memory and the glossary."
ALWAYS_ON_KNOWLEDGE = """1. Relationship #1: when a question asks about a relationship, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
2. Plan #2: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
3. Place mention #3: when a question asks about a place mention, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
4. Relative date #4: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
5. Relative date #5: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
6. Carry-over fact #6: when a question asks about a carry-over fact, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
7. Session #7: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
8. Session #8: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
9. Relative date #9: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
10. Duration #10: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
11. Preference #11: when a question asks about a preference, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
12. Event span #12: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
13. Relative date #13: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
14. Event span #14: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
15. Duration #15: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
16. Duration #16: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
17. Alias #17: when a question asks about a alias, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
18. Speaker turn #18: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
19. Carry-over fact #19: when a question asks about a carry-over fact, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
20. Recurring event #20: when a question asks about a recurring event, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
21. Carry-over fact #21: when a question asks about a carry-over fact, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
22. Plan #22: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
23. Duration #23: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
24. Session #24: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
25. Place mention #25: when a question asks about a place mention, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
26. Recurring event #26: when a question asks about a recurring event, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
27. Relationship #27: when a question asks about a relationship, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
28. Hobby #28: when a question asks about a hobby, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
29. Relationship #29: when a question asks about a relationship, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
30. Session #30: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
31. Hobby #31: when a question asks about a hobby, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
32. Duration #32: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
33. Alias #33: when a question asks about a alias, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
34. Count #34: when a question asks about a count, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
35. Alias #35: when a question asks about a alias, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
36. Place mention #36: when a question asks about a place mention, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
37. Anchor date #37: when a question asks about a anchor date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
38. Relationship #38: when a question asks about a relationship, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
39. Plan #39: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
40. Event span #40: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
41. Anchor date #41: when a question asks about a anchor date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
42. Duration #42: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
43. Duration #43: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
44. Relationship #44: when a question asks about a relationship, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
45. Plan #45: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
46. Relative date #46: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
47. Speaker turn #47: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
48. Hobby #48: when a question asks about a hobby, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
49. Event span #49: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
50. Hobby #50: when a question asks about a hobby, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
51. Relationship #51: when a question asks about a relationship, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
52. Carry-over fact #52: when a question asks about a carry-over fact, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
53. Place mention #53: when a question asks about a place mention, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
54. Duration #54: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
55. Preference #55: when a question asks about a preference, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
56. Speaker turn #56: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
57. Session #57: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
58. Alias #58: when a question asks about a alias, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
59. Count #59: when a question asks about a count, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
60. Relative date #60: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
61. Recurring event #61: when a question asks about a recurring event, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
62. Place mention #62: when a question asks about a place mention, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
63. Count #63: when a question asks about a count, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
64. Recurring event #64: when a question asks about a recurring event, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
65. Anchor date #65: when a question asks about a anchor date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
66. Count #66: when a question asks about a count, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
67. Relationship #67: when a question asks about a relationship, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
68. Preference #68: when a question asks about a preference, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
69. Session #69: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
70. Speaker turn #70: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
71. Plan #71: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
72. Place mention #72: when a question asks about a place mention, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
73. Speaker turn #73: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
74. Relative date #74: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
75. Preference #75: when a question asks about a preference, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
76. Anchor date #76: when a question asks about a anchor date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
77. Speaker turn #77: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
78. Relationship #78: when a question asks about a relationship, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
79. Anchor date #79: when a question asks about a anchor date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
80. Plan #80: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
81. Count #81: when a question asks about a count, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
82. Speaker turn #82: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
83. Event span #83: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
84. Recurring event #84: when a question asks about a recurring event, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
85. Hobby #85: when a question asks about a hobby, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
86. Hobby #86: when a question asks about a hobby, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
87. Alias #87: when a question asks about a alias, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
88. Session #88: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
89. Relative date #89: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
90. Plan #90: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
91. Duration #91: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
92. Duration #92: when a question asks about a duration, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
93. Plan #93: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
94. Event span #94: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
95. Anchor date #95: when a question asks about a anchor date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
96. Event span #96: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
97. Speaker turn #97: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
98. Count #98: when a question asks about a count, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
99. Relative date #99: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
100. Speaker turn #100: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
101. Plan #101: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
102. Event span #102: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
103. Recurring event #103: when a question asks about a recurring event, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
104. Preference #104: when a question asks about a preference, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
105. Anchor date #105: when a question asks about a anchor date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
106. Preference #106: when a question asks about a preference, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
107. Carry-over fact #107: when a question asks about a carry-over fact, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
108. Speaker turn #108: when a question asks about a speaker turn, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
109. Carry-over fact #109: when a question asks about a carry-over fact, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
110. Count #110: when a question asks about a count, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
111. Place mention #111: when a question asks about a place mention, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
112. Plan #112: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
113. Preference #113: when a question asks about a preference, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
114. Session #114: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
115. Event span #115: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
116. Event span #116: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
117. Count #117: when a question asks about a count, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
118. Anchor date #118: when a question asks about a anchor date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
119. Alias #119: when a question asks about a alias, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
120. Event span #120: when a question asks about a event span, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
121. Relationship #121: when a question asks about a relationship, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
122. Session #122: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
123. Relative date #123: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
124. Relative date #124: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
125. Count #125: when a question asks about a count, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
126. Preference #126: when a question asks about a preference, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
127. Place mention #127: when a question asks about a place mention, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
128. Place mention #128: when a question asks about a place mention, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
129. Session #129: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
130. Relative date #130: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
131. Plan #131: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
132. Plan #132: when a question asks about a plan, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
133. Relative date #133: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
134. Preference #134: when a question asks about a preference, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
135. Session #135: when a question asks about a session, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
136. Hobby #136: when a question asks about a hobby, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
137. Anchor date #137: when a question asks about a anchor date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
138. Recurring event #138: when a question asks about a recurring event, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
139. Relative date #139: when a question asks about a relative date, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date.
140. Carry-over fact #140: when a question asks about a carry-over fact, look for the turn that names it first and prefer the latest session's wording; resolve relative dates from the session date."""


@dataclass
class KnowledgeItem:
    statement: str = field(metadata={"description": "the text's main statement"})


@dataclass
class Query:
    keywords: str = field(metadata={"description": "keywords of the question"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.texts = []

    def write(self, item, raw_text):
        self.texts.append(raw_text)

    def read(self, query):
        asked = set(query.keywords.lower().split())
        ranked = sorted(self.texts, key=lambda t: len(asked & set(t.lower().split())), reverse=True)
        return "\n".join(ranked[:3])[:3000]
